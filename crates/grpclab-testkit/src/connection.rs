//! A raw HTTP/2 connection over a blocking socket: bytes in, frames out, nothing checked, so a
//! test can speak out of turn and read exactly what the server answered.

use crate::raw::{codes, frame, frame_with_length, preface};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A frame as read off the wire.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The frame type.
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// Its stream (the reserved bit cleared).
    pub stream: u32,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A raw HTTP/2 connection: bytes in, frames out. Reads time out after 10 s so a test that
/// waits for a frame that never comes fails instead of hanging.
pub struct RawConnection {
    tcp: TcpStream,
    /// While batching, frames collect here and go out in one write.
    batch: Option<Vec<u8>>,
}

impl RawConnection {
    /// Connects and sends the client preface and an empty SETTINGS frame.
    pub fn open(addr: SocketAddr) -> RawConnection {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut connection = RawConnection { tcp, batch: None };
        connection.send_raw(&preface(&[]));
        connection
    }

    /// Writes `bytes` (or adds them to the batch); a failed write fails the test.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        match &mut self.batch {
            Some(batch) => batch.extend_from_slice(bytes),
            None => self.tcp.write_all(bytes).unwrap(),
        }
    }

    /// Writes `bytes` now, reporting a failed write instead of panicking (a server that may
    /// legitimately close the connection mid-write).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.tcp.write_all(bytes)
    }

    /// Turns Nagle's algorithm off: a client doing strict round trips of small frames would
    /// otherwise wait for delayed ACKs (40 ms each).
    pub fn set_nodelay(&self) {
        self.tcp.set_nodelay(true).unwrap();
    }

    /// Frames sent from now on wait for [`RawConnection::end_batch`], then leave in one write.
    pub fn begin_batch(&mut self) {
        self.batch = Some(Vec::new());
    }

    /// Sends the batch in one write.
    pub fn end_batch(&mut self) {
        if let Some(batch) = self.batch.take() {
            self.tcp.write_all(&batch).unwrap();
        }
    }

    /// A second handle on the same socket (to write from another thread).
    pub fn try_clone(&self) -> RawConnection {
        RawConnection {
            tcp: self.tcp.try_clone().unwrap(),
            batch: None,
        }
    }

    /// The next frame if one arrives within `limit` (the usual read timeout otherwise).
    pub fn read_frame_within(&mut self, limit: Duration) -> Option<Frame> {
        self.tcp.set_read_timeout(Some(limit)).unwrap();
        let frame = self.read_frame();
        self.tcp
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        frame
    }

    /// Sends one frame; `length` in the header is the payload's.
    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.send_with_length(kind, flags, stream, payload, payload.len() as u32);
    }

    /// Sends one frame now, reporting a failed write (a server that closed the connection)
    /// instead of panicking.
    pub fn try_send(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        self.try_send_raw(&frame(kind, flags, stream, payload))
    }

    /// Sends one frame whose header declares `length` (which may lie).
    pub fn send_with_length(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
        length: u32,
    ) {
        self.send_raw(&frame_with_length(kind, flags, stream, payload, length));
    }

    /// The next frame, or `None` when the server closed the connection.
    pub fn read_frame(&mut self) -> Option<Frame> {
        let mut header = [0u8; 9];
        self.tcp.read_exact(&mut header).ok()?;
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; length];
        self.tcp.read_exact(&mut payload).ok()?;
        Some(Frame {
            kind: header[3],
            flags: header[4],
            stream: u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// Reads frames until the server closes the connection: true if it did (EOF or reset),
    /// false if the read timed out first (the connection is still up).
    pub fn reads_until_closed(&mut self) -> bool {
        let mut header = [0u8; 9];
        loop {
            if let Err(err) = self.tcp.read_exact(&mut header) {
                return !matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
            let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
            let mut payload = vec![0u8; length];
            if let Err(err) = self.tcp.read_exact(&mut payload) {
                return !matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }

    /// Reads frames until one of `kind` arrives (answering nothing); `None` if the connection
    /// closed first.
    pub fn read_until(&mut self, kind: u8) -> Option<Frame> {
        loop {
            let frame = self.read_frame()?;
            if frame.kind == kind {
                return Some(frame);
            }
        }
    }

    /// Reads until GOAWAY and returns its error code.
    pub fn goaway_code(&mut self) -> Option<u32> {
        let frame = self.read_until(codes::GOAWAY)?;
        Some(u32::from_be_bytes(frame.payload[4..8].try_into().ok()?))
    }
}
