// go_flow_client: the session flow of docs/examples/session-flow.toml written by hand on
// grpc-go (generated stubs, one connection, a goroutine per concurrent flow): Login, then
// List with the token (in the request and as a bearer header), then Get of the first item,
// each reply checked as the workload file checks it. A yardstick for what grpclab's
// declarative flows cost the client, since k6 (the usual scripted tool) is AGPL and not
// used here.
//
// Usage: flow_client TARGET FLOWS CONCURRENCY
// Prints one JSON line: {"flows":N,"passed":P,"failed":F,"seconds":S}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "flowclient/session"
)

var skuPattern = regexp.MustCompile(`^sku-u[0-9]+-`)

// browse runs one flow for user number `user`; false when a step failed or its reply
// missed its check.
func browse(ctx context.Context, client pb.SessionsClient, user uint64) bool {
	login, err := client.Login(ctx, &pb.LoginRequest{User: "u" + strconv.FormatUint(user, 10)})
	if err != nil {
		return false
	}
	token := login.GetToken()
	withToken := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	list, err := client.List(withToken, &pb.ListRequest{Token: token})
	if err != nil || len(list.GetItems()) == 0 || list.GetCount() < 1 {
		return false
	}
	sku := list.GetItems()[0].GetSku()
	if !skuPattern.MatchString(sku) {
		return false
	}
	item, err := client.Get(ctx, &pb.GetRequest{Token: token, Sku: sku})
	return err == nil && item.GetPriceCents() >= 1
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: flow_client TARGET FLOWS CONCURRENCY")
		os.Exit(2)
	}
	flows, err1 := strconv.ParseUint(os.Args[2], 10, 64)
	workers, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || workers < 1 {
		fmt.Fprintln(os.Stderr, "flow_client: FLOWS and CONCURRENCY are positive integers")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "flow_client: cannot connect to %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	defer conn.Close()
	client := pb.NewSessionsClient(conn)
	ctx := context.Background()
	var next, passed atomic.Uint64
	var done sync.WaitGroup
	start := time.Now()
	for range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			for {
				user := next.Add(1) - 1
				if user >= flows {
					return
				}
				if browse(ctx, client, user) {
					passed.Add(1)
				}
			}
		}()
	}
	done.Wait()
	seconds := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{
		"flows":   flows,
		"passed":  passed.Load(),
		"failed":  flows - passed.Load(),
		"seconds": seconds,
	})
	fmt.Println(string(out))
}
