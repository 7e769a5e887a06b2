//! The peer's SETTINGS (RFC 9113 §6.5), read by [`crate::control`] and applied here: the
//! initial window's change checked against every open stream (§6.9.2), and the
//! acknowledgement.

use super::*;

impl<S: Service> Connection<S> {
    pub(super) fn on_settings(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
        let Some(change) = control::read_settings(&header, payload)? else {
            return Ok(());
        };
        self.spend_flood_credit()?;
        if let Some(size) = change.header_table_size {
            self.encoder.set_max_size(size as usize);
        }
        if let Some(size) = change.max_frame_size {
            self.peer_max_frame = size as usize;
        }
        if let Some(value) = change.initial_window_size {
            let value = i64::from(value);
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
