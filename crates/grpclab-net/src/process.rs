//! Processes started inside a namespace of a pair: each dies with the process that started
//! it, however that one ends (so a killed run leaves no server behind in a namespace).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// `program` as a command run inside network namespace `namespace` (`None`: where this
/// process is), set to receive SIGKILL when the thread that spawns it ends
/// (PR_SET_PDEATHSIG): spawn it from a thread that outlives it.
pub fn command_in(namespace: Option<&str>, program: &std::path::Path) -> Command {
    let mut command = match namespace {
        Some(namespace) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", namespace]).arg(program);
            command
        }
        None => Command::new(program),
    };
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// Asks `child` to end (SIGTERM) and waits for it.
pub fn terminate(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill sends a signal to the id of a child not yet waited for, so the id
        // still names it.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let _ = child.wait();
}
