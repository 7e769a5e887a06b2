//! Flow control both sides share (RFC 9113 §6.9): a send window, the WINDOW_UPDATE rules
//! (an increment of 0 is a PROTOCOL_ERROR, a window past 2^31-1 a FLOW_CONTROL_ERROR, §6.9.1),
//! windows that SETTINGS_INITIAL_WINDOW_SIZE takes below zero (§6.9.2), and how much of a
//! body may go out now. Each connection decides what an error means on its side (the server
//! resets a stream, the client fails its call); the arithmetic is here once.

use crate::frame::{code, connection_error, ConnectionError, MAX_WINDOW};

/// Why a window cannot take a WINDOW_UPDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// An increment of 0: a PROTOCOL_ERROR (on a stream, a stream error).
    ZeroIncrement,
    /// The window would pass 2^31-1: a FLOW_CONTROL_ERROR.
    Overflow,
}

/// A send window: how many DATA bytes the peer lets us send. Signed, as a smaller
/// SETTINGS_INITIAL_WINDOW_SIZE may take it below zero (§6.9.2); nothing is sent until
/// WINDOW_UPDATEs bring it back above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(i64);

impl Window {
    /// A window of `bytes`, as the peer's SETTINGS (or the default 65,535) grants it.
    pub const fn new(bytes: u32) -> Window {
        Window(bytes as i64)
    }

    /// The bytes that may be sent now (zero or less: none).
    #[inline]
    pub fn available(self) -> i64 {
        self.0
    }

    /// `bytes` sent.
    #[inline]
    pub fn spend(&mut self, bytes: usize) {
        self.0 -= bytes as i64;
    }

    /// A WINDOW_UPDATE's `increment` added, or why it cannot be.
    pub fn grow(&mut self, increment: u32) -> Result<(), WindowError> {
        self.0 = grown(self.0, increment)?;
        Ok(())
    }

    /// A WINDOW_UPDATE on the connection (stream 0) added: an increment of 0 is a
    /// PROTOCOL_ERROR and a window past 2^31-1 a FLOW_CONTROL_ERROR, and either ends the
    /// connection. `overflow` is the side's reason for the second.
    pub fn grow_connection(
        &mut self,
        increment: u32,
        overflow: &'static str,
    ) -> Result<(), ConnectionError> {
        self.grow(increment).map_err(|err| match err {
            WindowError::ZeroIncrement => {
                connection_error(code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection")
            }
            WindowError::Overflow => connection_error(code::FLOW_CONTROL_ERROR, overflow),
        })
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE changed by `delta` (which may take it below zero, but not
    /// past 2^31-1: §6.9.2 makes that a FLOW_CONTROL_ERROR, and the window stays as it was).
    pub fn shift(&mut self, delta: i64) -> Result<(), WindowError> {
        let window = self.0 + delta;
        if window > i64::from(MAX_WINDOW) {
            return Err(WindowError::Overflow);
        }
        self.0 = window;
        Ok(())
    }
}

/// A window of `current` bytes after a WINDOW_UPDATE of `increment`, or why it cannot take
/// it (for a side that keeps a stream's window in another form, e.g. as an offset from the
/// initial window).
pub fn grown(current: i64, increment: u32) -> Result<i64, WindowError> {
    if increment == 0 {
        return Err(WindowError::ZeroIncrement);
    }
    let window = current + i64::from(increment);
    if window > i64::from(MAX_WINDOW) {
        return Err(WindowError::Overflow);
    }
    Ok(window)
}

/// How many bytes of a body may go out in the next DATA frame: the least of the connection's
/// window, the stream's and the peer's largest frame (zero when a window is spent).
#[inline]
pub fn sendable(connection: Window, stream: i64, max_frame: usize) -> usize {
    connection.0.min(stream).min(max_frame as i64).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_follow_the_rfc() {
        let mut window = Window::new(65_535);
        assert_eq!(window.grow(0), Err(WindowError::ZeroIncrement));
        assert_eq!(
            window.available(),
            65_535,
            "a refused update changes nothing"
        );
        window.grow(MAX_WINDOW - 65_535).unwrap();
        assert_eq!(window.available(), i64::from(MAX_WINDOW));
        assert_eq!(window.grow(1), Err(WindowError::Overflow));
        assert_eq!(grown(-10, 5), Ok(-5));
        let mut near = Window::new(MAX_WINDOW - 10);
        assert_eq!(near.shift(11), Err(WindowError::Overflow));
        assert_eq!(
            near.available(),
            i64::from(MAX_WINDOW - 10),
            "a refused shift changes nothing"
        );
    }

    #[test]
    fn a_smaller_initial_window_can_owe_bytes() {
        let mut window = Window::new(1_000);
        window.spend(800);
        window.shift(-500).unwrap();
        assert_eq!(window.available(), -300);
        assert_eq!(sendable(window, 10_000, 16_384), 0);
        window.grow(400).unwrap();
        assert_eq!(sendable(window, 10_000, 16_384), 100);
        assert_eq!(sendable(Window::new(1 << 20), 50, 16_384), 50);
        assert_eq!(sendable(Window::new(1 << 20), 1 << 20, 16_384), 16_384);
    }
}
