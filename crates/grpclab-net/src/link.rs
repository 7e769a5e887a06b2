//! The link between two TUN devices, emulated here: each packet read from one side is
//! dropped (`loss`), or held for its serialization at `rate` plus the one-way `delay` (±
//! `jitter`, order kept) and then written to the other side. One thread per direction.
//!
//! This is what netem would do in the kernel; this kernel has no sch_netem, so grpclab does
//! it itself, and says so in its output. What it costs and how exact it is are measured
//! (docs/studies/networks.md).

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::spec::LinkSpec;
use crate::NetError;

/// Packets a direction holds at most (netem's default limit); beyond it one is dropped.
pub const QUEUE_LIMIT: usize = 1000;

/// The largest packet a TUN device hands over (its MTU is at most 65535).
const PACKET_MAX: usize = 65536;

/// How long a direction waits at most before it looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(20);

/// What one direction did with the packets it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounts {
    /// Packets read from its source.
    pub packets: u64,
    /// Of those, dropped as the link's loss.
    pub lost: u64,
    /// Dropped because the queue was full.
    pub overflowed: u64,
    /// Written to the other side.
    pub delivered: u64,
    /// The bytes of the packets written (IP headers included).
    pub bytes: u64,
    /// CPU time its thread spent (user and system): the emulation's own cost.
    pub cpu: Duration,
}

impl DirectionCounts {
    /// What happened since `before` (an earlier reading of the same direction).
    pub fn since(&self, before: &DirectionCounts) -> DirectionCounts {
        DirectionCounts {
            packets: self.packets.saturating_sub(before.packets),
            lost: self.lost.saturating_sub(before.lost),
            overflowed: self.overflowed.saturating_sub(before.overflowed),
            delivered: self.delivered.saturating_sub(before.delivered),
            bytes: self.bytes.saturating_sub(before.bytes),
            cpu: self.cpu.saturating_sub(before.cpu),
        }
    }
}

/// One direction's counts as it runs, for readings while the link carries traffic; its
/// thread alone writes them.
#[derive(Debug, Default)]
struct LiveCounts {
    packets: AtomicU64,
    lost: AtomicU64,
    overflowed: AtomicU64,
    delivered: AtomicU64,
    bytes: AtomicU64,
}

impl LiveCounts {
    fn publish(&self, counts: &DirectionCounts) {
        self.packets.store(counts.packets, Ordering::Relaxed);
        self.lost.store(counts.lost, Ordering::Relaxed);
        self.overflowed.store(counts.overflowed, Ordering::Relaxed);
        self.delivered.store(counts.delivered, Ordering::Relaxed);
        self.bytes.store(counts.bytes, Ordering::Relaxed);
    }

    fn read(&self, cpu: Duration) -> DirectionCounts {
        DirectionCounts {
            packets: self.packets.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            overflowed: self.overflowed.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            cpu,
        }
    }
}

/// A direction's CPU, in all and per packet: `1.2 s (3.4 µs a packet)`.
pub fn cpu_text(counts: &DirectionCounts) -> String {
    let per_packet = counts.cpu.as_secs_f64() * 1e6 / counts.packets.max(1) as f64;
    format!(
        "{:.3} s ({per_packet:.1} µs a packet)",
        counts.cpu.as_secs_f64()
    )
}

/// When each packet leaves, one direction's: the emulation's arithmetic, apart from the
/// devices (so it can be checked without them).
#[derive(Debug)]
pub struct Schedule {
    spec: LinkSpec,
    /// When the last packet admitted finished its serialization at `rate`.
    last_departure: Option<Instant>,
    /// When the last packet admitted is released: later ones never before it.
    last_release: Option<Instant>,
    /// xorshift64 state: loss and jitter draws.
    random: u64,
    /// The cut's span, if any: every packet read within it is lost.
    outage: Option<(Instant, Instant)>,
}

impl Schedule {
    /// A direction's schedule for a link started at `started`; `seed` makes its draws
    /// repeatable.
    pub fn new(spec: LinkSpec, started: Instant, seed: u64) -> Schedule {
        Schedule {
            spec,
            last_departure: None,
            last_release: None,
            random: seed | 1,
            outage: spec
                .outage
                .map(|(at, length)| (started + at, started + at + length)),
        }
    }

    fn draw(&mut self) -> f64 {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        (self.random >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A packet of `len` bytes read at `now`: when it is released, or `None` when the link
    /// loses it.
    pub fn admit(&mut self, now: Instant, len: usize) -> Option<Instant> {
        if self
            .outage
            .is_some_and(|(from, until)| (from..until).contains(&now))
        {
            return None;
        }
        if self.spec.loss > 0.0 && self.draw() < self.spec.loss {
            return None;
        }
        let mut departure = now;
        if let Some(bits) = self.spec.rate_bits {
            let start = self.last_departure.map_or(now, |last| last.max(now));
            let nanos = (len as u128 * 8 * 1_000_000_000) / u128::from(bits.max(1));
            departure = start + Duration::from_nanos(nanos as u64);
            self.last_departure = Some(departure);
        }
        let mut delay = self.spec.delay;
        if !self.spec.jitter.is_zero() {
            let jitter = self.spec.jitter.as_secs_f64();
            let offset = (self.draw() * 2.0 - 1.0) * jitter;
            delay = Duration::from_secs_f64((delay.as_secs_f64() + offset).max(0.0));
        }
        let release = (departure + delay).max(self.last_release.unwrap_or(now));
        self.last_release = Some(release);
        Some(release)
    }
}

/// A running link: two directions, stopped (and their counts read) by [`Link::stop`] or
/// on drop.
pub struct Link {
    stop: Arc<AtomicBool>,
    directions: Vec<JoinHandle<DirectionCounts>>,
    live: Vec<Arc<LiveCounts>>,
}

impl Link {
    /// Starts the link between `a` and `b` (each a TUN device's descriptor): what `a`'s side
    /// sends arrives at `b` and the other way round, each direction with `spec`.
    pub fn start(a: OwnedFd, b: OwnedFd, spec: LinkSpec) -> Result<Link, NetError> {
        let clone = |fd: &OwnedFd| {
            fd.try_clone()
                .map_err(|err| NetError(format!("cannot duplicate a TUN descriptor: {err}")))
        };
        let (a_out, b_out) = (clone(&a)?, clone(&b)?);
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut directions = Vec::with_capacity(2);
        let mut live = Vec::with_capacity(2);
        for (index, (from, to)) in [(a, b_out), (b, a_out)].into_iter().enumerate() {
            set_nonblocking(&from)?;
            let stop = Arc::clone(&stop);
            let counts = Arc::new(LiveCounts::default());
            live.push(Arc::clone(&counts));
            let schedule = Schedule::new(spec, started, 0x9e37_79b9_7f4a_7c15 ^ index as u64);
            let thread = std::thread::Builder::new()
                .name(format!("grpclab-link-{index}"))
                .spawn(move || carry(&from, &to, schedule, &stop, &counts))
                .map_err(|err| NetError(format!("cannot start the link's thread: {err}")))?;
            directions.push(thread);
        }
        Ok(Link {
            stop,
            directions,
            live,
        })
    }

    /// What each direction has done so far, [a → b, b → a], while it runs: a reading
    /// before and one after a stretch of load give the stretch's figures
    /// ([`DirectionCounts::since`]). Packets of the batch a direction is handling are not
    /// in it yet.
    pub fn counts(&self) -> Vec<DirectionCounts> {
        self.directions
            .iter()
            .zip(&self.live)
            .map(|(thread, live)| live.read(running_thread_cpu(thread)))
            .collect()
    }

    /// Stops both directions and returns what each did: [a → b, b → a].
    pub fn stop(mut self) -> Vec<DirectionCounts> {
        self.halt()
    }

    fn halt(&mut self) -> Vec<DirectionCounts> {
        self.stop.store(true, Ordering::Relaxed);
        self.directions
            .drain(..)
            .map(|thread| thread.join().unwrap_or_default())
            .collect()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.halt();
    }
}

fn set_nonblocking(fd: &OwnedFd) -> Result<(), NetError> {
    // SAFETY: fcntl on a descriptor this function borrows, reading then setting its flags.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(NetError(format!(
            "cannot make a TUN descriptor non-blocking: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// One direction: reads what `from` sends, holds each packet until its release and writes
/// it to `to`, until `stop`.
fn carry(
    from: &OwnedFd,
    to: &OwnedFd,
    mut schedule: Schedule,
    stop: &AtomicBool,
    live: &LiveCounts,
) -> DirectionCounts {
    let mut counts = DirectionCounts::default();
    // A packet's release is a timer: the default slack (50 µs) would add to every delay.
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer; it changes only this
    // thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buffer = vec![0u8; PACKET_MAX];
    while !stop.load(Ordering::Relaxed) {
        let wait = queue
            .front()
            .map_or(STOP_CHECK, |(at, _)| {
                at.saturating_duration_since(Instant::now())
            })
            .min(STOP_CHECK);
        wait_readable(from, wait);
        loop {
            // SAFETY: reads at most `buffer.len()` bytes into `buffer`, which this function
            // owns, from a descriptor it borrows.
            let read =
                unsafe { libc::read(from.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            let Ok(len) = usize::try_from(read) else {
                break; // EAGAIN: nothing more now (other errors: the device is going away).
            };
            if len == 0 {
                break;
            }
            counts.packets += 1;
            let Some(release) = schedule.admit(Instant::now(), len) else {
                counts.lost += 1;
                continue;
            };
            if queue.len() >= QUEUE_LIMIT {
                counts.overflowed += 1;
                continue;
            }
            queue.push_back((release, buffer[..len].to_vec()));
        }
        let now = Instant::now();
        while queue.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, packet)) = queue.pop_front() else {
                break;
            };
            // SAFETY: writes `packet`'s bytes, which it owns, to a descriptor it borrows.
            let written =
                unsafe { libc::write(to.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
            if written > 0 {
                counts.delivered += 1;
                counts.bytes += packet.len() as u64;
            }
        }
        live.publish(&counts);
    }
    counts.cpu = thread_cpu();
    counts
}

/// The calling thread's CPU time so far (user and system), on the clock
/// [`Link::counts`] reads while the thread runs.
fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A CPU-time clock's reading (zero if it cannot be read).
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: reads `clock` into one timespec this function owns.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The CPU time so far of a direction's thread, which runs until the link stops (zero if
/// the clock cannot be read).
fn running_thread_cpu<T>(thread: &JoinHandle<T>) -> Duration {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the handle's thread is neither joined nor detached while `thread` is borrowed,
    // so its pthread_t is valid; the call writes one clockid_t this function owns.
    if unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) } != 0 {
        return Duration::ZERO;
    }
    cpu_clock(clock)
}

/// Waits until `fd` has a packet to read or `wait` passes (to the nanosecond: ppoll).
fn wait_readable(fd: &OwnedFd, wait: Duration) {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one pollfd and one timespec, both on this stack frame, no signal mask.
    unsafe {
        libc::ppoll(&mut poll, 1, &timeout, std::ptr::null());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LinkSpec {
        LinkSpec {
            delay: Duration::from_millis(20),
            ..LinkSpec::default()
        }
    }

    #[test]
    fn a_packet_is_released_after_the_delay() {
        let now = Instant::now();
        let mut schedule = Schedule::new(spec(), now, 1);
        assert_eq!(
            schedule.admit(now, 100),
            Some(now + Duration::from_millis(20))
        );
    }

    #[test]
    fn the_rate_spaces_packets_by_their_size_and_jitter_keeps_their_order() {
        let now = Instant::now();
        let mut schedule = Schedule::new(
            LinkSpec {
                rate_bits: Some(8_000_000), // 1 byte per microsecond
                jitter: Duration::from_millis(5),
                ..spec()
            },
            now,
            7,
        );
        let mut last = now;
        let mut departures = Vec::new();
        for _ in 0..1000 {
            let release = schedule.admit(now, 1000).unwrap();
            assert!(release >= last, "a packet overtook the one before");
            last = release;
            departures.push(release);
        }
        // 1000 packets of 1000 bytes at 1 byte/µs: the last leaves ~1 s after the first.
        let span = *departures.last().unwrap() - departures[0];
        assert!(span >= Duration::from_millis(990), "{span:?}");
        assert!(span <= Duration::from_millis(1010), "{span:?}");
    }

    #[test]
    fn the_loss_drops_its_share() {
        let mut schedule = Schedule::new(
            LinkSpec {
                loss: 0.01,
                ..spec()
            },
            Instant::now(),
            3,
        );
        let now = Instant::now();
        let lost = (0..100_000)
            .filter(|_| schedule.admit(now, 100).is_none())
            .count();
        // 1 % of 100,000: 1,000, within the binomial's ±4 sigma (~±40).
        assert!((960..=1040).contains(&lost), "{lost}");
    }

    #[test]
    fn a_cut_loses_every_packet_within_it_and_none_outside() {
        let started = Instant::now();
        let mut schedule = Schedule::new(
            LinkSpec {
                outage: Some((Duration::from_secs(5), Duration::from_secs(2))),
                ..spec()
            },
            started,
            1,
        );
        let at = |secs: f64| started + Duration::from_secs_f64(secs);
        assert!(schedule.admit(at(4.999), 100).is_some());
        assert!(schedule.admit(at(5.0), 100).is_none());
        assert!(schedule.admit(at(6.999), 100).is_none());
        assert!(schedule.admit(at(7.0), 100).is_some());
    }

    /// Two ends of a packet socket pair: what one end writes, the other reads as one
    /// packet, as a TUN device hands them over.
    fn packet_pair() -> (OwnedFd, OwnedFd) {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`, which this test owns.
        let made =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()) };
        assert_eq!(made, 0, "{}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just made and are owned by nothing else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_running_link_is_read_as_it_carries_and_a_reading_is_taken_from_another() {
        let (a_device, a_side) = packet_pair();
        let (b_device, b_side) = packet_pair();
        let link = Link::start(a_device, b_device, LinkSpec::default()).unwrap();
        let before = link.counts();
        assert_eq!(before.len(), 2);
        for _ in 0..10 {
            // SAFETY: writes 100 bytes of a buffer this test owns.
            let written =
                unsafe { libc::write(a_side.as_raw_fd(), [7u8; 100].as_ptr().cast(), 100) };
            assert_eq!(written, 100);
        }
        let mut received = [0u8; 200];
        for _ in 0..10 {
            // SAFETY: reads at most 200 bytes into a buffer this test owns (blocking).
            let read = unsafe { libc::read(b_side.as_raw_fd(), received.as_mut_ptr().cast(), 200) };
            assert_eq!(read, 100, "each packet arrives whole");
        }
        // The direction publishes after its batch: wait for it (the test has no clock).
        let mut now = link.counts();
        while now[0].delivered < 10 {
            std::thread::yield_now();
            now = link.counts();
        }
        let stretch = now[0].since(&before[0]);
        assert_eq!(
            (stretch.packets, stretch.delivered, stretch.bytes),
            (10, 10, 1000)
        );
        assert_eq!(now[1].packets, 0, "nothing went the other way");
        let end = link.stop();
        assert_eq!(end[0].bytes, 1000);
        assert!(end[0].cpu >= now[0].cpu, "a thread's CPU only grows");
    }
}
