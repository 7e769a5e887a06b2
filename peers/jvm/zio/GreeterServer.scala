// scala_zio: the Greeter on zio-grpc (ZIO 2), written the plain way: the reply echoes the request.
// Usage: GreeterServer PORT [CERT KEY] (with CERT and KEY: TLS)

import helloworld.helloworld.{HelloReply, HelloRequest}
import helloworld.helloworld.ZioHelloworld.Greeter
import io.grpc.StatusException
import io.grpc.netty.NettyServerBuilder
import scalapb.zio_grpc.{ServerLayer, ServiceList}
import java.io.File
import java.net.InetSocketAddress
import zio._

object GreeterImpl extends Greeter {
  def sayHello(request: HelloRequest): IO[StatusException, HelloReply] =
    ZIO.succeed(HelloReply(response = request.request))
}

object GreeterServer extends ZIOAppDefault {
  def run =
    getArgs.flatMap { args =>
      val port = args.headOption.flatMap(_.toIntOption).getOrElse(50051)
      val builder = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
      if (args.length == 3) builder.useTransportSecurity(new File(args(1)), new File(args(2)))
      ServerLayer
        .fromServiceList(
          builder,
          ServiceList.add(GreeterImpl)
        )
        .launch
    }
}
