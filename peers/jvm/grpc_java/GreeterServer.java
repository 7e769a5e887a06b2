// java_hotspot_grpc_pgc(_direct): the Greeter on grpc-java with its netty transport, written
// the plain way. The executor is the one setting grpc_bench varies: JVM_EXECUTOR_TYPE =
// workStealing (the default: a work-stealing pool, one thread per available CPU) or direct
// (calls run on netty's event loop).
// Usage: java GreeterServer PORT [CERT KEY] (with CERT and KEY: TLS, ALPN from the JDK)

import helloworld.GreeterGrpc;
import helloworld.Helloworld.HelloReply;
import helloworld.Helloworld.HelloRequest;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.File;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

public final class GreeterServer {
  static final class Greeter extends GreeterGrpc.GreeterImplBase {
    @Override
    public void sayHello(HelloRequest request, StreamObserver<HelloReply> replies) {
      replies.onNext(HelloReply.newBuilder().setResponse(request.getRequest()).build());
      replies.onCompleted();
    }
  }

  /** GRPC_SERVER_HOST: the address grpclab's harness reaches the server on; loopback otherwise. */
  static String serverHost() {
    String host = System.getenv("GRPC_SERVER_HOST");
    return host == null || host.isEmpty() ? "127.0.0.1" : host;
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    NettyServerBuilder builder =
        NettyServerBuilder.forAddress(new InetSocketAddress(serverHost(), port));
    String executor = System.getenv().getOrDefault("JVM_EXECUTOR_TYPE", "workStealing");
    switch (executor) {
      case "direct" -> builder.directExecutor();
      case "workStealing" -> builder.executor(
          Executors.newWorkStealingPool(Runtime.getRuntime().availableProcessors()));
      default -> throw new IllegalArgumentException(
          "JVM_EXECUTOR_TYPE must be direct or workStealing, not " + executor);
    }
    if (args.length == 3) {
      builder.useTransportSecurity(new File(args[1]), new File(args[2]));
    }
    Server server = builder.addService(new Greeter()).build().start();
    server.awaitTermination();
  }
}
