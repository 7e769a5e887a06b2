// node_grpcjs: the Greeter on @grpc/grpc-js, the schema loaded at start by @grpc/proto-loader
// (the usual dynamic way). Usage: node server.js PORT PROTO_FILE [CERT KEY]  (PEM files: TLS)
"use strict";
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const fs = require("fs");
const [port, protoFile, certFile, keyFile] = process.argv.slice(2);
const credentials = certFile && keyFile
  ? grpc.ServerCredentials.createSsl(null, [
      { cert_chain: fs.readFileSync(certFile), private_key: fs.readFileSync(keyFile) },
    ])
  : grpc.ServerCredentials.createInsecure();
const definition = protoLoader.loadSync(protoFile, { keepCase: true, enums: String, defaults: false });
const helloworld = grpc.loadPackageDefinition(definition).helloworld;

const server = new grpc.Server();
server.addService(helloworld.Greeter.service, {
  SayHello(call, callback) {
    callback(null, { response: call.request.request });
  },
});
server.bindAsync(`127.0.0.1:${port}`, credentials, (err) => {
  if (err) {
    console.error(`cannot listen on ${port}: ${err.message}`);
    process.exit(1);
  }
});
