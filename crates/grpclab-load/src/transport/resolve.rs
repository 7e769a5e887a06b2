//! Re-made connections follow their name: which address a connection dials when it is made
//! again (the name resolved anew with `crate::naming`).

use std::net::SocketAddr;

/// The address connection `connection` dials when it is re-made: with a name
/// (`LoadConfig::naming`), resolved again — round_robin takes the connection's slot among the
/// addresses the name has now, pick_first keeps `current` while the name still has it, else
/// takes the first; without one, or when resolving fails (said in the debug log), `current`.
pub(crate) async fn redial_target(
    config: &crate::config::LoadConfig,
    connection: usize,
    current: SocketAddr,
) -> SocketAddr {
    let Some(naming) = &config.naming else {
        return current;
    };
    match naming.resolve().await {
        Ok(addresses) => {
            let chosen = match config.balance {
                crate::config::Balance::RoundRobin => addresses[connection % addresses.len()],
                crate::config::Balance::PickFirst if addresses.contains(&current) => current,
                crate::config::Balance::PickFirst => addresses[0],
            };
            tracing::debug!(connection, ?addresses, %chosen, "re-resolved");
            chosen
        }
        Err(reason) => {
            tracing::debug!(connection, %reason, "re-resolution failed: dialling the same address");
            current
        }
    }
}
