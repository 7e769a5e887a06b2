// scala_zio: the Greeter on zio-grpc (ZIO 2), written the plain way: the reply echoes the request.
// Usage: GreeterServer PORT [CERT KEY] [--direct-executor] (with CERT and KEY: TLS; with
// --direct-executor grpc-java hands calls to zio-grpc on netty's event loop instead of its
// default cached thread pool: one thread hop fewer per call, the change the profile suggests in
// docs/studies/scala-servers.md)

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
      val (flags, positional) = args.partition(_.startsWith("--"))
      val unknown = flags.filterNot(_ == "--direct-executor")
      if (unknown.nonEmpty)
        Console
          .printLineError(
            s"scala_zio: unknown option ${unknown.mkString(" ")}: the only option is --direct-executor")
          .orDie *> exit(ExitCode(2))
      else serve(directExecutor = flags.nonEmpty, positional)
    }

  def serve(directExecutor: Boolean, positional: Chunk[String]) = {
    val port = positional.headOption.flatMap(_.toIntOption).getOrElse(50051)
    val builder = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
    if (directExecutor) builder.directExecutor()
    if (positional.length == 3)
      builder.useTransportSecurity(new File(positional(1)), new File(positional(2)))
    ServerLayer
      .fromServiceList(
        builder,
        ServiceList.add(GreeterImpl)
      )
      .launch
  }
}
