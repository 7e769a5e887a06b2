// cpp_grpc_mt: the Greeter on gRPC C++'s asynchronous API, one completion queue and one
// polling thread per server CPU (grpc_bench's cpp_grpc_mt shape).
// Usage: server PORT THREADS
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "helloworld.grpc.pb.h"

namespace {

// One SayHello call: asked for, answered, then deleted. Each call posts the next request
// before answering, so a queue always has one waiting.
class Call {
 public:
  Call(helloworld::Greeter::AsyncService* service, grpc::ServerCompletionQueue* queue)
      : service_(service), queue_(queue), responder_(&context_) {
    service_->RequestSayHello(&context_, &request_, &responder_, queue_, queue_, this);
  }

  // Called when the queue hands back this call's tag with ok = true.
  void Advance() {
    if (answered_) {
      delete this;
      return;
    }
    new Call(service_, queue_);
    *reply_.mutable_response() = request_.request();
    answered_ = true;
    responder_.Finish(reply_, grpc::Status::OK, this);
  }

 private:
  helloworld::Greeter::AsyncService* service_;
  grpc::ServerCompletionQueue* queue_;
  grpc::ServerContext context_;
  helloworld::HelloRequest request_;
  helloworld::HelloReply reply_;
  grpc::ServerAsyncResponseWriter<helloworld::HelloReply> responder_;
  bool answered_ = false;
};

void Poll(helloworld::Greeter::AsyncService* service, grpc::ServerCompletionQueue* queue) {
  new Call(service, queue);
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
    auto* call = static_cast<Call*>(tag);
    if (ok) {
      call->Advance();
    } else {
      delete call;  // shutting down
    }
  }
}

// Reads a whole file into `out`; false when it cannot be read.
bool ReadFile(const char* path, std::string* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return false;
  }
  std::ostringstream text;
  text << file.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: server PORT [THREADS [CERT KEY]]\n";
    return 2;
  }
  const std::string address = std::string("127.0.0.1:") + argv[1];
  const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  helloworld::Greeter::AsyncService service;
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (argc > 4) {
    // TLS: the certificate chain and key as PEM files.
    grpc::SslServerCredentialsOptions options;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    if (!ReadFile(argv[3], &pair.cert_chain) || !ReadFile(argv[4], &pair.private_key)) {
      std::cerr << "cannot read the TLS certificate " << argv[3] << " or key " << argv[4] << "\n";
      return 1;
    }
    options.pem_key_cert_pairs.push_back(pair);
    credentials = grpc::SslServerCredentials(options);
  }
  builder.AddListeningPort(address, credentials);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < threads; ++i) {
    queues.push_back(builder.AddCompletionQueue());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "cannot listen on " << address << "\n";
    return 1;
  }
  std::vector<std::thread> pollers;
  for (auto& queue : queues) {
    pollers.emplace_back(Poll, &service, queue.get());
  }
  for (auto& poller : pollers) {
    poller.join();
  }
  return 0;
}
