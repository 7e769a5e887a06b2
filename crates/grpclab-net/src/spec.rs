//! A network as the command line names it: `delay=20ms,jitter=2ms,loss=0.1%,rate=1gbit,mtu=1500`
//! (netem's terms), or `lo` for the loopback device every run used before.

use std::fmt;
use std::time::Duration;

use crate::NetError;

/// What the link between the client's and the server's namespaces does to each packet, in
/// each direction (so a round trip meets `delay` twice).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// One-way delay.
    pub delay: Duration,
    /// Each packet's delay varies uniformly within ±jitter (packets keep their order).
    pub jitter: Duration,
    /// The share of packets dropped, 0.0 to 1.0.
    pub loss: f64,
    /// The link's rate in bits per second (`None`: no limit but the emulator's speed).
    pub rate_bits: Option<u64>,
    /// The link's MTU in bytes.
    pub mtu: u32,
    /// A cut: from this long after the link starts, every packet is lost for this long
    /// (netem's `loss 100%` for a while), both ways.
    pub outage: Option<(Duration, Duration)>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            rate_bits: None,
            mtu: 1500,
            outage: None,
        }
    }
}

/// A network a run crosses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetworkSpec {
    /// The loopback device, as without `--network`.
    Loopback,
    /// Two namespaces joined by an emulated link.
    Link(LinkSpec),
}

impl NetworkSpec {
    /// Parses `lo` or comma-separated `key=value` settings (delay, jitter, loss, rate, mtu);
    /// each mistake is one line saying what to give instead.
    pub fn parse(text: &str) -> Result<NetworkSpec, NetError> {
        NetworkSpec::parse_reason(text)
            .map_err(|why| NetError(format!("--network '{}': {why}", text.trim())))
    }

    /// [`NetworkSpec::parse`], a mistake said without naming the flag and its value (for a
    /// command-line parser that names them itself).
    pub fn parse_reason(text: &str) -> Result<NetworkSpec, String> {
        let text = text.trim();
        if text == "lo" {
            return Ok(NetworkSpec::Loopback);
        }
        let mut link = LinkSpec::default();
        let mut seen = Vec::new();
        for part in text.split(',') {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "'{part}' is not KEY=VALUE; give e.g. delay=20ms,loss=0.1%, or lo for loopback"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            if seen.contains(&key) {
                return Err(format!("{key} is given twice"));
            }
            let duration = |value: &str| -> Result<Duration, String> {
                humantime::parse_duration(value)
                    .map_err(|err| format!("{key}={value}: {err}; give a duration such as 20ms"))
            };
            match key {
                "delay" => link.delay = duration(value)?,
                "jitter" => link.jitter = duration(value)?,
                "loss" => {
                    let percent = value
                        .strip_suffix('%')
                        .and_then(|number| number.trim().parse::<f64>().ok())
                        .filter(|percent| (0.0..=100.0).contains(percent))
                        .ok_or_else(|| {
                            format!(
                                "loss={value}: give a share of packets from 0% to 100%, e.g. 0.1%"
                            )
                        })?;
                    link.loss = percent / 100.0;
                }
                "rate" => link.rate_bits = Some(parse_rate(value)?),
                "outage" => {
                    let hint = || {
                        format!(
                            "outage={value}: give AT+FOR, two durations: the cut starts AT after the link does and lasts FOR (e.g. outage=5s+2s)"
                        )
                    };
                    let (at, length) = value.split_once('+').ok_or_else(hint)?;
                    let at = humantime::parse_duration(at.trim()).map_err(|_| hint())?;
                    let length = humantime::parse_duration(length.trim()).map_err(|_| hint())?;
                    if length.is_zero() {
                        return Err(hint());
                    }
                    link.outage = Some((at, length));
                }
                "mtu" => {
                    link.mtu = value
                        .parse::<u32>()
                        .ok()
                        .filter(|mtu| (1280..=65535).contains(mtu))
                        .ok_or_else(|| {
                            format!(
                                "mtu={value}: give a number of bytes from 1280 to 65535"
                            )
                        })?;
                }
                other => {
                    return Err(format!(
                        "unknown setting '{other}'; the settings are delay, jitter, loss, rate, mtu and outage"
                ))
                }
            }
            seen.push(key);
        }
        if link.jitter > link.delay {
            return Err(format!(
                "jitter {:?} exceeds delay {:?}: a packet's delay would go below zero",
                link.jitter, link.delay
            ));
        }
        Ok(NetworkSpec::Link(link))
    }
}

/// `1gbit`, `100mbit`, `500kbit`, `9600bit`: bits per second.
fn parse_rate(value: &str) -> Result<u64, String> {
    let units = [
        ("gbit", 1_000_000_000u64),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
        ("bit", 1),
    ];
    let parsed = units.iter().find_map(|(unit, scale)| {
        let number = value.strip_suffix(unit)?.trim().parse::<f64>().ok()?;
        Some(number * *scale as f64)
    });
    match parsed {
        Some(bits) if (8_000.0..=400e9).contains(&bits) => Ok(bits as u64),
        _ => Err(format!(
            "rate={value}: give bits per second from 8kbit to 400gbit with a unit: bit, kbit, mbit or gbit (e.g. 1gbit)"
        )),
    }
}

impl fmt::Display for NetworkSpec {
    /// The form `parse` reads, settings at their defaults left out (`lo` for loopback).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let NetworkSpec::Link(link) = self else {
            return f.write_str("lo");
        };
        let mut parts = vec![format!("delay={}", humantime::format_duration(link.delay))];
        if !link.jitter.is_zero() {
            parts.push(format!(
                "jitter={}",
                humantime::format_duration(link.jitter)
            ));
        }
        if link.loss > 0.0 {
            parts.push(format!("loss={}%", link.loss * 100.0));
        }
        if let Some(bits) = link.rate_bits {
            parts.push(format!("rate={}", rate_text(bits)));
        }
        if link.mtu != 1500 {
            parts.push(format!("mtu={}", link.mtu));
        }
        if let Some((at, length)) = link.outage {
            parts.push(format!(
                "outage={}+{}",
                humantime::format_duration(at),
                humantime::format_duration(length)
            ));
        }
        f.write_str(&parts.join(","))
    }
}

fn rate_text(bits: u64) -> String {
    for (unit, scale) in [
        ("gbit", 1_000_000_000u64),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bits >= scale && bits.is_multiple_of(scale) {
            return format!("{}{unit}", bits / scale);
        }
    }
    format!("{bits}bit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print_back() {
        let spec =
            NetworkSpec::parse("delay=20ms,jitter=2ms,loss=0.1%,rate=1gbit,mtu=9000,outage=5s+2s")
                .unwrap();
        let NetworkSpec::Link(link) = spec else {
            panic!("{spec:?}")
        };
        assert_eq!(link.delay, Duration::from_millis(20));
        assert_eq!(link.jitter, Duration::from_millis(2));
        assert!((link.loss - 0.001).abs() < 1e-12);
        assert_eq!(link.rate_bits, Some(1_000_000_000));
        assert_eq!(link.mtu, 9000);
        assert_eq!(
            link.outage,
            Some((Duration::from_secs(5), Duration::from_secs(2)))
        );
        assert_eq!(
            spec.to_string(),
            "delay=20ms,jitter=2ms,loss=0.1%,rate=1gbit,mtu=9000,outage=5s+2s"
        );
        assert_eq!(NetworkSpec::parse(&spec.to_string()).unwrap(), spec);
        assert_eq!(NetworkSpec::parse("lo").unwrap(), NetworkSpec::Loopback);
        assert_eq!(
            NetworkSpec::parse("delay=0ms").unwrap().to_string(),
            "delay=0s"
        );
    }

    #[test]
    fn each_mistake_is_one_line_naming_it() {
        for (text, says) in [
            ("delay", "is not KEY=VALUE"),
            ("delay=fast", "delay=fast: "),
            ("loss=2", "loss=2: give a share"),
            ("loss=101%", "loss=101%: give a share"),
            ("rate=1gb", "rate=1gb: give bits per second"),
            ("rate=1bit", "from 8kbit"),
            ("mtu=100", "mtu=100: give a number of bytes from 1280"),
            ("speed=1", "unknown setting 'speed'"),
            ("delay=1ms,delay=2ms", "delay is given twice"),
            ("delay=1ms,jitter=2ms", "jitter 2ms exceeds delay 1ms"),
            ("outage=5s", "outage=5s: give AT+FOR"),
            ("outage=5s+0s", "outage=5s+0s: give AT+FOR"),
        ] {
            let err = NetworkSpec::parse(text).unwrap_err().0;
            assert!(err.contains(says), "{text}: {err}");
            assert!(err.starts_with(&format!("--network '{text}'")), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}
