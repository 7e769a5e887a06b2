// scala_pekko: the Greeter on Apache Pekko gRPC (Pekko HTTP's HTTP/2 server), written the plain
// way: the reply echoes the request, on Pekko's default dispatcher.
// Usage: GreeterServer PORT [CERT KEY] (with CERT and KEY: HTTPS, PEM files)

import com.typesafe.config.ConfigFactory
import helloworld.helloworld.{Greeter, GreeterHandler, HelloReply, HelloRequest}
import java.io.FileInputStream
import java.nio.file.{Files, Paths}
import java.security.{KeyFactory, KeyStore, PrivateKey, SecureRandom}
import java.security.cert.{Certificate, CertificateFactory}
import java.security.spec.PKCS8EncodedKeySpec
import java.util.Base64
import javax.net.ssl.{KeyManagerFactory, SSLContext}
import org.apache.pekko.actor.ActorSystem
import org.apache.pekko.http.scaladsl.{ConnectionContext, Http, HttpsConnectionContext}
import scala.concurrent.Future

class GreeterImpl extends Greeter {
  def sayHello(in: HelloRequest): Future[HelloReply] =
    Future.successful(HelloReply(response = in.request))
}

object GreeterServer {
  def main(args: Array[String]): Unit = {
    val port = args(0).toInt
    val config = ConfigFactory
      .parseString("pekko.http.server.preview.enable-http2 = on")
      .withFallback(ConfigFactory.defaultApplication())
    implicit val system: ActorSystem = ActorSystem("GreeterServer", config)
    val service = GreeterHandler(new GreeterImpl)
    val server = Http().newServerAt("127.0.0.1", port)
    (if (args.length == 3) server.enableHttps(https(args(1), args(2))) else server).bind(service)
  }

  /** A PKCS #8 private key ("BEGIN PRIVATE KEY"), EC or RSA, from a PEM file. */
  def privateKey(path: String): PrivateKey = {
    val pem = new String(Files.readAllBytes(Paths.get(path)), "US-ASCII")
    val base64 = pem.linesIterator.filterNot(_.startsWith("-----")).mkString
    val spec = new PKCS8EncodedKeySpec(Base64.getDecoder.decode(base64))
    try KeyFactory.getInstance("EC").generatePrivate(spec)
    catch { case _: java.security.spec.InvalidKeySpecException => KeyFactory.getInstance("RSA").generatePrivate(spec) }
  }

  /** A server TLS context from a PEM certificate and a PEM private key. */
  def https(certPath: String, keyPath: String): HttpsConnectionContext = {
    val key = privateKey(keyPath)
    val input = new FileInputStream(certPath)
    val certificate =
      try CertificateFactory.getInstance("X.509").generateCertificate(input)
      finally input.close()
    val store = KeyStore.getInstance("PKCS12")
    store.load(null, null)
    store.setKeyEntry("server", key, Array.emptyCharArray, Array[Certificate](certificate))
    val keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm)
    keys.init(store, Array.emptyCharArray)
    val context = SSLContext.getInstance("TLS")
    context.init(keys.getKeyManagers, null, new SecureRandom)
    ConnectionContext.httpsServer(context)
  }
}
