// java_armeria(_blocking): the Greeter on Armeria's gRPC service, written the plain way. The
// one setting varied is the seed's question: ARMERIA_BLOCKING_EXECUTOR = false (the default:
// requests are deserialized and served on the event loop) or true (GrpcServiceBuilder's
// useBlockingTaskExecutor: deserialization and the call move to the blocking task executor).
// Usage: java GreeterServer PORT [CERT KEY] (with CERT and KEY: HTTPS)

import com.linecorp.armeria.server.Server;
import com.linecorp.armeria.server.ServerBuilder;
import com.linecorp.armeria.server.grpc.GrpcService;
import helloworld.GreeterGrpc;
import helloworld.Helloworld.HelloReply;
import helloworld.Helloworld.HelloRequest;
import io.grpc.stub.StreamObserver;
import java.io.File;
import java.net.InetSocketAddress;

public final class GreeterServer {
  static final class Greeter extends GreeterGrpc.GreeterImplBase {
    @Override
    public void sayHello(HelloRequest request, StreamObserver<HelloReply> replies) {
      replies.onNext(HelloReply.newBuilder().setResponse(request.getRequest()).build());
      replies.onCompleted();
    }
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    String blocking = System.getenv().getOrDefault("ARMERIA_BLOCKING_EXECUTOR", "false");
    if (!blocking.equals("true") && !blocking.equals("false")) {
      throw new IllegalArgumentException(
          "ARMERIA_BLOCKING_EXECUTOR must be true or false, not " + blocking);
    }
    GrpcService service =
        GrpcService.builder()
            .addService(new Greeter())
            .useBlockingTaskExecutor(Boolean.parseBoolean(blocking))
            .build();
    String host = System.getenv("GRPC_SERVER_HOST");
    InetSocketAddress address =
        new InetSocketAddress(host == null || host.isEmpty() ? "127.0.0.1" : host, port);
    ServerBuilder builder = Server.builder().service(service);
    if (args.length == 3) {
      builder.https(address).tls(new File(args[1]), new File(args[2]));
    } else {
      builder.http(address);
    }
    Server server = builder.build();
    server.closeOnJvmShutdown();
    server.start().join();
  }
}
