// go_grpc: the Greeter on grpc-go, written the plain way (grpc.NewServer, generated stubs).
// Usage: server PORT
package main

import (
	"context"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"

	pb "peer/helloworld"
)

type greeter struct {
	pb.UnimplementedGreeterServer
}

func (greeter) SayHello(_ context.Context, request *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Response: request.GetRequest()}, nil
}

func main() {
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		log.Fatalf("cannot listen: %v", err)
	}
	server := grpc.NewServer()
	pb.RegisterGreeterServer(server, greeter{})
	if err := server.Serve(listener); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
