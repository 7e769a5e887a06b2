//! The byte pipe under a connection loop: a TCP socket, plaintext (h2c) or TLS, or a unix
//! socket (plaintext: a sidecar's or a local server's).
//!
//! The loops are readiness-driven (wait until readable, read everything available; write as
//! far as the socket takes it), so TLS is driven the same way rather than through
//! `AsyncRead`/`AsyncWrite`: the handshake runs first (tokio-rustls, before the loop), then
//! the established rustls session is fed the socket's bytes and asked for plaintext, and our
//! frames are encrypted into it and written out. The plaintext path is the socket calls it was
//! before TLS existed, behind one `Option` check.

use bytes::BytesMut;
use std::io::{self, BufRead, Read, Write};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// Ciphertext rustls may hold before a write is refused (`WouldBlock`), so a peer that does
/// not read cannot make a TLS connection buffer without limit.
const TLS_BUFFER_LIMIT: usize = 256 * 1024;

/// A connection's socket: TCP, with an established TLS session on it or not; or a unix socket.
pub struct Socket {
    tcp: Stream,
    /// Boxed: the session is large, and plaintext connections should not carry its space.
    tls: Option<Box<TlsSession>>,
}

struct TlsSession {
    session: rustls::Connection,
    /// Plaintext was decrypted during the handshake and not read yet: readable at once.
    buffered: bool,
}

impl From<TcpStream> for Socket {
    fn from(tcp: TcpStream) -> Socket {
        Socket {
            tcp: Stream::Tcp(tcp),
            tls: None,
        }
    }
}

impl From<UnixStream> for Socket {
    fn from(unix: UnixStream) -> Socket {
        Socket {
            tcp: Stream::Unix(unix),
            tls: None,
        }
    }
}

/// The stream socket under a [`Socket`]. Both kinds are driven the same way (readiness, then
/// `recv`/`send` on the descriptor), so the connection loops never know which they have.
#[derive(Debug)]
pub(crate) enum Stream {
    /// TCP (TCP_NODELAY set by whoever connected or accepted it).
    Tcp(TcpStream),
    /// A unix stream socket.
    Unix(UnixStream),
}

impl Stream {
    async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(tcp) => tcp.readable().await,
            Stream::Unix(unix) => unix.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(tcp) => tcp.writable().await,
            Stream::Unix(unix) => unix.writable().await,
        }
    }

    /// Runs `f` on the socket as tokio's `try_io` does (a `WouldBlock` clears readiness).
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Stream::Tcp(tcp) => tcp.try_io(interest, f),
            Stream::Unix(unix) => unix.try_io(interest, f),
        }
    }

    fn sock(&self) -> socket2::SockRef<'_> {
        match self {
            Stream::Tcp(tcp) => socket2::SockRef::from(tcp),
            Stream::Unix(unix) => socket2::SockRef::from(unix),
        }
    }

    #[inline]
    fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.try_write(bytes),
            Stream::Unix(unix) => unix.try_write(bytes),
        }
    }

    /// Half-closes our side (FIN after what was written).
    pub(crate) fn shutdown_write(&self) {
        let _ = self.sock().shutdown(std::net::Shutdown::Write);
    }

    /// Reads and drops what arrives until the peer closes (or an error).
    pub(crate) async fn discard_until_closed(&self) {
        let mut scratch = vec![std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
        loop {
            if self.readable().await.is_err() {
                return;
            }
            match self.try_io(Interest::READABLE, || self.sock().recv(&mut scratch)) {
                Ok(0) => return,
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("tcp", &self.tcp)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Socket {
    /// A socket whose TLS handshake is done (tokio-rustls's `into_inner()`).
    pub fn with_tls(tcp: TcpStream, session: impl Into<rustls::Connection>) -> Socket {
        let tcp = Stream::Tcp(tcp);
        let mut session = session.into();
        // The handshake may have read application data behind its last message (a server's
        // SETTINGS right after its Finished): it sits decrypted in the session, and no
        // readiness event will announce it again.
        let buffered = session
            .process_new_packets()
            .map(|state| state.plaintext_bytes_to_read() > 0)
            .unwrap_or(true);
        session.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Socket {
            tcp,
            tls: Some(Box::new(TlsSession { session, buffered })),
        }
    }

    /// Waits until a read may make progress.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        if self.tls.as_ref().is_some_and(|tls| tls.buffered) {
            return Ok(());
        }
        self.tcp.readable().await
    }

    /// Waits until the socket takes writes.
    pub(crate) async fn writable(&self) -> io::Result<()> {
        self.tcp.writable().await
    }

    /// Whether encrypted bytes wait to be written ([`Socket::flush`]); never on plaintext.
    #[inline]
    pub(crate) fn wants_flush(&self) -> bool {
        match &self.tls {
            None => false,
            Some(tls) => tls.session.wants_write(),
        }
    }

    /// Writes the encrypted bytes waiting in the session, as far as the socket takes them.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match &mut self.tls {
            None => Ok(()),
            Some(tls) => flush_session(&self.tcp, &mut tls.session),
        }
    }

    /// Writes as much of `bytes` as the socket (or the TLS session's buffer) takes;
    /// `WouldBlock` when it takes nothing.
    #[inline]
    pub(crate) fn try_write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            return self.tcp.try_write(bytes);
        };
        let session = &mut tls.session;
        flush_session(&self.tcp, session)?;
        if session.wants_write() {
            // The socket is full: take no more plaintext until it drains.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let taken = session.writer().write(bytes)?;
        flush_session(&self.tcp, session)?;
        if taken == 0 && !bytes.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    /// Reads what the socket has into `buf` (decrypted, on TLS); `Ok(0)` is end of stream.
    pub(crate) fn read_available(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match &mut self.tls {
            None => read_available(&self.tcp, buf),
            Some(tls) => read_tls_available(&self.tcp, tls, buf),
        }
    }

    /// Gives the stream socket back (to close it after an error: the TLS session has nothing
    /// more to say that the peer would still read).
    pub(crate) fn into_stream(self) -> Stream {
        self.tcp
    }
}

/// Reads what the socket has into `buf`'s spare capacity; `Ok(0)` is end of stream.
///
/// When a read returns less than the space offered, the socket was drained at that moment:
/// this tells tokio so (by answering its readiness closure with `WouldBlock`), which saves the
/// extra read that would only return EAGAIN before the loop waits again — one syscall per turn
/// of every connection. tokio clears readiness only if no new readiness event arrived since
/// it was observed, so data that arrives right after the read still wakes the loop.
fn read_available(tcp: &Stream, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let offered = spare.len();
    let mut got = 0usize;
    let result = tcp.try_io(Interest::READABLE, || {
        let n = tcp.sock().recv(spare)?;
        got = n;
        if n > 0 && n < offered {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    let n = match result {
        Ok(n) => n,
        Err(err) if err.kind() == io::ErrorKind::WouldBlock && got > 0 => got,
        Err(err) => return Err(err),
    };
    // SAFETY: `recv` initialized the first `n` bytes of the spare capacity (it returns how
    // many bytes it wrote, at most `offered`), so they may become part of the buffer.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Feeds the session what the socket has and moves the plaintext into `buf`, until the socket
/// is drained or about `buf`'s spare capacity has arrived. All decrypted plaintext is moved
/// out every time (growing `buf` if needed), so none is left in the session for a readiness
/// event that will not come.
fn read_tls_available(tcp: &Stream, tls: &mut TlsSession, buf: &mut BytesMut) -> io::Result<usize> {
    tls.buffered = false;
    let offered = buf.capacity() - buf.len();
    let mut got = 0usize;
    let mut eof = false;
    loop {
        got += drain_plaintext(&mut tls.session, buf, &mut eof)?;
        if eof || got >= offered {
            break;
        }
        let read = tcp.try_io(Interest::READABLE, || {
            tls.session.read_tls(&mut SocketIo(tcp.sock()))
        });
        match read {
            Ok(0) => eof = true,
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(err) => return Err(err),
        }
        if let Err(error) = tls.session.process_new_packets() {
            // Tell the peer why (an alert), as far as the socket takes it.
            let _ = flush_session(tcp, &mut tls.session);
            return Err(io::Error::new(io::ErrorKind::InvalidData, error));
        }
    }
    got += drain_plaintext(&mut tls.session, buf, &mut eof)?;
    if got > 0 {
        Ok(got)
    } else if eof {
        Ok(0)
    } else {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

/// Moves every decrypted byte from the session into `buf`; sets `eof` when the peer closed
/// the session (close_notify) or the socket.
fn drain_plaintext(
    session: &mut rustls::Connection,
    buf: &mut BytesMut,
    eof: &mut bool,
) -> io::Result<usize> {
    let mut got = 0;
    loop {
        // The plaintext is copied straight from rustls's own buffer (its `BufRead` side):
        // no uninitialised memory is ever handed to a reader as `&mut [u8]`.
        let mut reader = session.reader();
        match reader.fill_buf() {
            Ok([]) => {
                *eof = true;
                return Ok(got);
            }
            Ok(chunk) => {
                let n = chunk.len();
                if buf.capacity() - buf.len() < n {
                    buf.reserve(n.max(16 * 1024));
                }
                buf.extend_from_slice(chunk);
                reader.consume(n);
                got += n;
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(got),
            // The socket closed without close_notify: the end, as for plaintext.
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
                *eof = true;
                return Ok(got);
            }
            Err(err) => return Err(err),
        }
    }
}

/// Writes the session's pending ciphertext until the socket would block.
fn flush_session(tcp: &Stream, session: &mut rustls::Connection) -> io::Result<()> {
    while session.wants_write() {
        match tcp.try_io(Interest::WRITABLE, || {
            session.write_tls(&mut SocketIo(tcp.sock()))
        }) {
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// In TLS 1.3 the client's handshake ends before the server has checked the client's
/// certificate (or noticed there is none): a server that refuses it says so with an alert
/// after the client's handshake "succeeded". So that a refused client certificate is one line
/// before a run rather than every call failing during it, this reads the server's first
/// records after the handshake (session tickets, its SETTINGS, or the alert) and processes
/// them; plaintext stays in the session for the connection to read (see
/// [`Socket::with_tls`]). A server that sends nothing within `wait` is given the benefit of the
/// doubt; TLS 1.2 decides within the handshake, so nothing is read.
pub async fn await_tls13_verdict(
    tcp: &TcpStream,
    session: &mut rustls::ClientConnection,
    wait: std::time::Duration,
) -> Result<Tls13Verdict, rustls::Error> {
    if session.protocol_version() != Some(rustls::ProtocolVersion::TLSv1_3) {
        return Ok(Tls13Verdict::Open);
    }
    let verdict = tokio::time::timeout(wait, async {
        loop {
            if tcp.readable().await.is_err() {
                return Ok(Tls13Verdict::Open);
            }
            let stream = SocketIo(socket2::SockRef::from(tcp));
            match tcp.try_io(Interest::READABLE, || session.read_tls(&mut { stream })) {
                // The end of the stream (or a reset) before any record: the caller decides
                // what it means (a refused client certificate, when one was asked for).
                Ok(0) => return Ok(Tls13Verdict::Closed),
                Ok(_) => return session.process_new_packets().map(|_| Tls13Verdict::Open),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Ok(Tls13Verdict::Closed),
            }
        }
    })
    .await;
    verdict.unwrap_or(Ok(Tls13Verdict::Open))
}

/// What the server did right after a TLS 1.3 handshake, short of an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls13Verdict {
    /// It sent records (or nothing within the wait): the connection is open.
    Open,
    /// It closed the connection before sending any record.
    Closed,
}

/// Blocking-style `Read`/`Write` over the non-blocking socket, for rustls's `read_tls` and
/// `write_tls`, always called inside `try_io` so a `WouldBlock` clears tokio's readiness.
struct SocketIo<'a>(socket2::SockRef<'a>);

impl Read for SocketIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        (&*self.0).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
