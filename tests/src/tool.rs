//! Host tools of the `verbs` crate (`write_bw`, `rc_pingpong`, ...) run on
//! an appliance's ring, as the tests and benchmarks drive them: started with
//! their output captured, waited for with a limit, killed past it.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::verbs_tool;

/// Starts tool `name` on `ring` with `args` (split on whitespace).
pub fn spawn(name: &str, ring: &Path, args: &str) -> std::io::Result<Child> {
    Command::new(verbs_tool(name))
        .arg("--ring")
        .arg(ring)
        .args(args.split_whitespace())
        .env_remove("RDMA_RING")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Waits for `child` at most `limit`: whether it succeeded (a tool still
/// running then is killed and did not), and its stdout followed by stderr.
pub fn finish(mut child: Child, limit: Duration) -> std::io::Result<(bool, String)> {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut out)?;
    }
    Ok((status.is_some_and(|s| s.success()), out))
}
