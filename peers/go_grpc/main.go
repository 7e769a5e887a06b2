// go_grpc: the Greeter on grpc-go, written the plain way (grpc.NewServer, generated stubs).
// Usage: server PORT [CERT KEY [CLIENT_CA]]   (with CERT and KEY, PEM files: TLS; with
// CLIENT_CA too, client certificates signed by it are required: mutual TLS)
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "peer/helloworld"
)

type greeter struct {
	pb.UnimplementedGreeterServer
}

func (greeter) SayHello(_ context.Context, request *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Response: request.GetRequest()}, nil
}

func main() {
	// GRPC_SERVER_HOST: the address grpclab's harness reaches the server on (its namespace's
	// across --network); loopback otherwise.
	host := os.Getenv("GRPC_SERVER_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(host, os.Args[1]))
	if err != nil {
		log.Fatalf("cannot listen: %v", err)
	}
	var options []grpc.ServerOption
	if len(os.Args) >= 5 {
		pair, err := tls.LoadX509KeyPair(os.Args[2], os.Args[3])
		if err != nil {
			log.Fatalf("cannot load the TLS certificate and key: %v", err)
		}
		pem, err := os.ReadFile(os.Args[4])
		if err != nil {
			log.Fatalf("cannot read the client CA: %v", err)
		}
		clientCAs := x509.NewCertPool()
		if !clientCAs.AppendCertsFromPEM(pem) {
			log.Fatalf("no certificate in the client CA file %s", os.Args[4])
		}
		options = append(options, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCAs,
		})))
	} else if len(os.Args) >= 4 {
		creds, err := credentials.NewServerTLSFromFile(os.Args[2], os.Args[3])
		if err != nil {
			log.Fatalf("cannot load the TLS certificate and key: %v", err)
		}
		options = append(options, grpc.Creds(creds))
	}
	server := grpc.NewServer(options...)
	pb.RegisterGreeterServer(server, greeter{})
	if err := server.Serve(listener); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
