//! Name resolution for `dns:` targets: once before the run (by the command line) and again
//! whenever a connection is re-made (`transport/resolve.rs`), so a name whose addresses change
//! during a run (a rolling restart, a scaled service) is followed as gRPC clients follow it.
//!
//! `dns:///NAME:PORT` (and `NAME:PORT`) ask the system's resolver (getaddrinfo: /etc/hosts,
//! then resolv.conf); `dns://SERVER[:PORT]/NAME:PORT` asks that DNS server directly (gRPC's
//! authority form), with hickory-resolver, nothing cached: each resolution is a fresh answer.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::Resolver;

/// How long one resolution may take before it fails.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// A name to resolve, and who answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// The host name.
    pub host: String,
    /// The port every address gets.
    pub port: u16,
    /// A DNS server to ask (`dns://SERVER/...`); `None`: the system's resolver.
    pub server: Option<SocketAddr>,
}

impl Naming {
    /// Every address the name has now, in the order given, each once; an error names the
    /// name and why.
    pub async fn resolve(&self) -> Result<Vec<SocketAddr>, String> {
        let found = match self.server {
            None => tokio::time::timeout(
                RESOLVE_TIMEOUT,
                tokio::net::lookup_host((self.host.as_str(), self.port)),
            )
            .await
            .map_err(|_| {
                format!(
                    "resolving {} timed out after {RESOLVE_TIMEOUT:?}",
                    self.host
                )
            })?
            .map_err(|err| format!("cannot resolve {}: {err}", self.host))?
            .collect::<Vec<_>>(),
            Some(server) => self.ask(server).await?,
        };
        let mut addresses = Vec::with_capacity(found.len());
        for address in found {
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
        if addresses.is_empty() {
            return Err(format!("{} resolves to no address", self.host));
        }
        Ok(addresses)
    }

    /// Asks `server` (UDP, then TCP if truncated) for the name's A and AAAA records.
    async fn ask(&self, server: SocketAddr) -> Result<Vec<SocketAddr>, String> {
        let group = NameServerConfigGroup::from_ips_clear(&[server.ip()], server.port(), true);
        let config = ResolverConfig::from_parts(None, Vec::new(), group);
        let mut options = ResolverOpts::default();
        // Every resolution asks again: a re-resolution must see a changed answer at once.
        options.cache_size = 0;
        options.attempts = 1;
        options.timeout = RESOLVE_TIMEOUT;
        let mut builder = Resolver::builder_with_config(config, TokioConnectionProvider::default());
        *builder.options_mut() = options;
        let resolver = builder.build();
        // A trailing dot: the name as given, not searched in resolv.conf's domains.
        let fqdn = if self.host.ends_with('.') {
            self.host.clone()
        } else {
            format!("{}.", self.host)
        };
        let answer = resolver
            .lookup_ip(fqdn.as_str())
            .await
            .map_err(|err| format!("DNS server {server} cannot resolve {}: {err}", self.host))?;
        Ok(answer
            .iter()
            .map(|ip: IpAddr| SocketAddr::new(ip, self.port))
            .collect())
    }
}
