//! A pod's PID limit, as a kubelet's `podPidsLimit` sets one
//! (<https://kubernetes.io/docs/concepts/policy/pid-limiting/>): every process of the pod,
//! zombies included, counts against `pids.max` of a pids cgroup of the pod's own, and a fork
//! beyond it fails (`sh: can't fork: Resource temporarily unavailable`).
//!
//! The cgroup is `<cluster>/<pod uid>` under the pids hierarchy (the cluster's name is its exec
//! root's, `embedded-cluster-<process id>-<n>`): cgroup v1's
//! `/sys/fs/cgroup/pids`, or v2's `/sys/fs/cgroup` with the pids controller enabled for the
//! cluster's directory. The pod's PID 1 (through `unshare`) and each exec's process (through
//! `nsenter`) join it between fork and exec, before they can fork anything themselves, so no
//! process of the pod escapes it. Making it needs write access to the hierarchy (root, as a
//! kubelet has); where there is none the namespace says so once and the pods run unlimited.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// cgroup v1's pids hierarchy.
const V1_ROOT: &str = "/sys/fs/cgroup/pids";
/// cgroup v2's unified hierarchy.
const V2_ROOT: &str = "/sys/fs/cgroup";

/// One pod's pids cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
    procs: CString,
}

impl PidsCgroup {
    /// Makes the pod's cgroup in the cluster's directory `cluster`, with `pids.max` at `limit`.
    pub fn create(cluster: &str, pod_uid: &str, limit: u32) -> io::Result<Self> {
        let cluster = cluster_dir(cluster)?;
        let segment: String = pod_uid.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let dir = cluster.join(if segment.is_empty() { "pod".to_string() } else { segment });
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("pids.max"), limit.to_string())?;
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a cgroup path with a NUL"))?;
        Ok(Self { dir, procs })
    }

    /// The `cgroup.procs` file a process writes itself into to join.
    pub fn procs(&self) -> &CStr {
        &self.procs
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Fails while a killed process has not been reaped yet; the cluster's directory is
        // removed at its stop, when its pods are all gone.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. For a `pre_exec`
/// hook: it only opens and writes (`0` is "the writer"), which are async-signal-safe and
/// allocate nothing.
pub fn join(procs: &CStr) -> io::Result<()> {
    let fd = rustix::fs::open(procs, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, b"0")?;
    Ok(())
}

/// Removes the cluster's directory of pod cgroups (those left empty).
pub fn remove_cluster_dir(cluster: &str) {
    let Ok(dir) = cluster_path(cluster) else { return };
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    let _ = std::fs::remove_dir(&dir);
}

/// The cluster's directory of pod cgroups, made (and, on v2, given the pids controller) if
/// needed.
fn cluster_dir(cluster: &str) -> io::Result<PathBuf> {
    let dir = cluster_path(cluster)?;
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)?;
    }
    if dir.starts_with(V1_ROOT) {
        return Ok(dir);
    }
    // v2: a controller reaches a child only through its parent's subtree_control.
    for parent in [Path::new(V2_ROOT), dir.as_path()] {
        let control = parent.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&control)?;
        if !enabled.split_whitespace().any(|c| c == "pids") {
            std::fs::write(&control, "+pids")?;
        }
    }
    Ok(dir)
}

fn cluster_path(cluster: &str) -> io::Result<PathBuf> {
    if Path::new(V1_ROOT).join("cgroup.procs").is_file() {
        return Ok(Path::new(V1_ROOT).join(cluster));
    }
    let controllers = std::fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"))
        .map_err(|e| io::Error::new(e.kind(), format!("no cgroup v1 pids hierarchy and no cgroup v2: {e}")))?;
    if !controllers.split_whitespace().any(|c| c == "pids") {
        return Err(io::Error::other("cgroup v2 without the pids controller"));
    }
    Ok(Path::new(V2_ROOT).join(cluster))
}
