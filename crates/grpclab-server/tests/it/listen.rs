//! lab's listening socket: its accept queue holds a burst of connections that a server
//! busy elsewhere has not accepted yet (a load generator opening thousands at once).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// More connections than the 128 the standard library's `bind` lets wait, and fewer than
/// this process's usual descriptor limit (1024) and the kernel's cap on the queue (somaxconn,
/// 4096 on current kernels).
const BURST: usize = 600;

#[test]
fn a_burst_of_connections_waits_in_the_accept_queue_instead_of_being_dropped() {
    let listener = grpclab_server::lab::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    // Nothing accepts: every connection must complete its handshake and wait in the queue.
    // Past a full queue the kernel drops the SYN, and the connect below times out.
    let mut held = Vec::with_capacity(BURST);
    for n in 0..BURST {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            Ok(stream) => held.push(stream),
            Err(err) => panic!(
                "connection {n} of {BURST} was not queued ({err}): the listen backlog is too small"
            ),
        }
    }
    assert_eq!(held.len(), BURST);
    // The queued connections are there to be accepted.
    listener.set_nonblocking(true).unwrap();
    let mut accepted = 0;
    while listener.accept().is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, BURST, "every queued connection is accepted");
}
