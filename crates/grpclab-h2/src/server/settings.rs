//! The peer's SETTINGS (RFC 9113 §6.5): values checked and applied, the initial window's
//! change spread over every open stream (§6.9.2), and the acknowledgement.

use super::*;

impl<S: Service> Connection<S> {
    pub(super) fn on_settings(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
        if header.stream != 0 {
            return Err(connection_error(
                code::PROTOCOL_ERROR,
                "SETTINGS on a stream",
            ));
        }
        if header.has(flags::ACK) {
            if !payload.is_empty() {
                return Err(connection_error(
                    code::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        self.spend_flood_credit()?;
        // Only the last value of each setting in a frame counts (they apply in order), so a
        // frame repeating an entry thousands of times costs what one entry does.
        let mut initial_window = None;
        for (id, value) in frame::parse_settings(payload)? {
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_max_size(value as usize),
                setting::INITIAL_WINDOW_SIZE => initial_window = Some(i64::from(value)),
                setting::MAX_FRAME_SIZE => self.peer_max_frame = value as usize,
                _ => {}
            }
        }
        if let Some(value) = initial_window {
            self.check_initial_window(value)?;
            self.peer_initial_window = value;
        }
        self.settings_received = true;
        frame::write_settings_ack(&mut self.out);
        self.send_blocked();
        Ok(())
    }

    /// A new SETTINGS_INITIAL_WINDOW_SIZE may not push any open stream's window past 2^31-1
    /// (§6.9.2: FLOW_CONTROL_ERROR). O(1) while the upper bound says no stream can overflow;
    /// otherwise one walk makes the bound exact.
    pub(super) fn check_initial_window(&mut self, value: i64) -> Result<(), ConnectionError> {
        let max = i64::from(frame::MAX_WINDOW);
        if self.max_send_offset + value <= max {
            return Ok(());
        }
        self.max_send_offset = self
            .streams
            .values()
            .map(|stream| stream.send_window_offset)
            .max()
            .unwrap_or(0);
        if self.max_send_offset + value > max {
            return Err(connection_error(
                code::FLOW_CONTROL_ERROR,
                "a stream window exceeds 2^31-1",
            ));
        }
        Ok(())
    }
}
