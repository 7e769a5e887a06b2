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
