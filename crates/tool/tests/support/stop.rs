//! Ending a tool process a test started: SIGTERM first, so that a server ends what it
//! started (the warm Wetech browser's ChromeDriver and Chromium, in process groups of
//! their own), then SIGKILL for a process that does not exit in time.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a process has to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Stops `child` (SIGTERM, at most [`GRACE`], then SIGKILL) and reaps it.
pub fn stop(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _killed = child.kill();
    let _reaped = child.wait();
}
