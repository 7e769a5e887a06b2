// connect_go: the Greeter on connect-go, which serves gRPC, gRPC-Web and the Connect
// protocol from one handler (over HTTP/1.1 and cleartext HTTP/2, or TLS).
// Usage: server PORT [CERT KEY]
//
// A call with the header x-want-code: N (1-16) ends with that gRPC code instead, its message
// "asked for code N" and one error detail, so a client's status mapping can be checked
// against each code in each protocol.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "peer/helloworld"
	"peer/helloworld/helloworldconnect"
)

type greeter struct{}

func (greeter) SayHello(
	_ context.Context,
	request *connect.Request[pb.HelloRequest],
) (*connect.Response[pb.HelloReply], error) {
	if wanted := request.Header().Get("x-want-code"); wanted != "" {
		code, err := strconv.Atoi(wanted)
		if err != nil || code < 1 || code > 16 {
			return nil, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("x-want-code %q is not a code from 1 to 16", wanted))
		}
		failure := connect.NewError(connect.Code(code), fmt.Errorf("asked for code %d", code))
		if detail, err := connect.NewErrorDetail(wrapperspb.String("a detail")); err == nil {
			failure.AddDetail(detail)
		}
		return nil, failure
	}
	return connect.NewResponse(&pb.HelloReply{Response: request.Msg.GetRequest()}), nil
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
	mux := http.NewServeMux()
	mux.Handle(helloworldconnect.NewGreeterHandler(greeter{}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	server := &http.Server{Handler: mux, Protocols: protocols}
	if len(os.Args) >= 4 {
		err = server.ServeTLS(listener, os.Args[2], os.Args[3])
	} else {
		err = server.Serve(listener)
	}
	if err != nil {
		log.Fatalf("serve: %v", err)
	}
}
