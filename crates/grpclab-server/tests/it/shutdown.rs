//! lab's shutdown while clients keep connecting (as clients do right after a GOAWAY): the
//! server ends cleanly (`Ok`), never with "a worker thread stopped" because a connection was
//! accepted as the workers stopped taking them.

use grpclab_server::lab::{self, LabConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[test]
fn shutdown_during_a_connection_storm_ends_cleanly() {
    for round in 0..12 {
        let listener = lab::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let server = std::thread::spawn(move || lab::run(listener, 2, LabConfig::default(), token));
        // Two clients connecting and dropping as fast as they can, until the server is gone.
        let stop = Arc::new(AtomicBool::new(false));
        let storms: Vec<_> = (0..2)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = std::net::TcpStream::connect(addr);
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        shutdown.cancel();
        let result = server.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        for storm in storms {
            storm.join().unwrap();
        }
        assert!(result.is_ok(), "round {round}: {result:?}");
    }
}

/// The listener closes before any connection hears GOAWAY: a client that reconnects on
/// GOAWAY (as gRPC clients do) is refused at once, never accepted into a backlog that is then
/// reset ("Connection reset by peer" in its handshake) or dropped unserved.
#[test]
fn a_client_told_goaway_finds_the_listener_closed() {
    use grpclab_testkit::raw::{codes, preface};
    use std::io::{Read, Write};
    for round in 0..300 {
        let listener = lab::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let server = std::thread::spawn(move || lab::run(listener, 2, LabConfig::default(), token));
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.write_all(&preface(&[])).unwrap();
        // The server's SETTINGS first: then the connection is a worker's.
        let mut head = [0u8; 9];
        client.read_exact(&mut head).unwrap();
        assert_eq!(head[3], codes::SETTINGS, "round {round}");
        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        client.read_exact(&mut vec![0u8; length]).unwrap();
        shutdown.cancel();
        // Frames until the GOAWAY (a SETTINGS ACK may come before it).
        loop {
            client.read_exact(&mut head).unwrap();
            let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; length];
            client.read_exact(&mut payload).unwrap();
            if head[3] == codes::GOAWAY {
                break;
            }
        }
        let again = std::net::TcpStream::connect(addr);
        assert_eq!(
            again.as_ref().map_err(std::io::Error::kind).err(),
            Some(std::io::ErrorKind::ConnectionRefused),
            "round {round}: a connection after GOAWAY was {again:?}"
        );
        drop(client);
        assert!(server.join().unwrap().is_ok(), "round {round}");
    }
}
