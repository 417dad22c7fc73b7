//! The Slurm recipe of docs/archive.md on a real cluster (issue 45, item 4): a
//! one-node Slurm (Debian's `slurmctld`, `slurmd`, `slurm-client` and
//! `munge`, 22.05) started in the foreground as root, its configuration,
//! key, sockets, state and logs in a temporary folder, runs the recipe as a
//! job array over a generated archive with `sbatch --wait`; `profconv report
//! merge` joins the shards' reports. The merged report must be the report of
//! a one-machine run, input for input, and the output trees the same bytes.
//!
//! Needs root and those packages (`.ci/run` installs them). Outside CI a
//! missing one skips with a note; under `CI=true` it fails. The daemons are
//! stopped, and anything still running in the test's folder killed, whatever
//! happens; a normal end asserts that nothing was left.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

/// The Slurm recipe (docs/archive.md, "Across machines: shards") as this
/// test runs it, from the folder holding `archive/`, with `profconv` on
/// `PATH`: the whole code block, which [`the_recipe_run_here_is_the_readmes`]
/// finds in docs/archive.md.
const RECIPE: &str = "mkdir -p out reports
sbatch --array=0-7 --wrap 'profconv convert archive/ -o out/ --to pprof --resume --shard auto/8 --report reports/$SLURM_ARRAY_TASK_ID.json'";

/// docs/archive.md's merge of the shards' reports.
const MERGE: &str = "profconv report merge reports/*.json -o report.json";

/// The shard count of [`RECIPE`].
const SHARDS: usize = 8;

/// How long the cluster may take to start, and the job array to finish:
/// far above what they take (seconds), for a loaded machine.
const START_LIMIT: Duration = Duration::from_secs(120);
const ARRAY_LIMIT: Duration = Duration::from_secs(600);

#[test]
fn the_recipe_run_here_is_the_readmes() {
    let doc = std::fs::read_to_string(manifest_dir().join("docs/archive.md")).unwrap();
    assert!(
        doc.contains(&format!("```\n{RECIPE}\n```")),
        "docs/archive.md's Slurm recipe is no longer the block `{RECIPE}`: update RECIPE in tests/slurm.rs"
    );
    assert!(
        doc.contains(&format!("`{MERGE}`")),
        "docs/archive.md no longer merges with `{MERGE}`: update MERGE in tests/slurm.rs"
    );
}

#[test]
fn the_readmes_slurm_array_on_a_real_cluster_gives_the_outputs_and_report_of_one_run() {
    let Some(tools) = Tools::find() else { return };
    let started = Instant::now();
    let dir = tempdir();
    let work = dir.path();
    let inputs = make_archive(&work.join("archive"));
    let one = shell(
        "profconv convert archive/ -o one/ --to pprof --report one.json",
        work,
    )
    .output()
    .unwrap();
    assert!(one.status.success(), "one-machine run: {}", text(&one));

    let mut cluster = Cluster::start(&tools, work);
    let up = started.elapsed();
    // `sbatch --wait` returns when every task has ended, with the largest
    // exit code among them.
    let mut recipe = shell(
        &format!("sbatch() {{ command sbatch --wait \"$@\"; }}\n{RECIPE}"),
        work,
    );
    recipe.env("SLURM_CONF", cluster.conf());
    let array = cluster.within(&mut recipe, ARRAY_LIMIT, "the job array");
    assert!(
        array.status.success(),
        "the job array failed: {}\n{}",
        text(&array),
        cluster.logs()
    );
    let array_done = started.elapsed();
    let merge = shell(MERGE, work).output().unwrap();
    assert!(
        merge.status.success(),
        "{MERGE}: {}\n{}",
        text(&merge),
        cluster.logs()
    );
    let left = cluster.stop();
    assert!(
        left.is_empty(),
        "left running after the cluster stopped: {left:#?}"
    );

    assert_same_as_one_run(work, inputs);
    println!(
        "slurm: {inputs} inputs in {SHARDS} shards, inputs (bytes) per shard: {}",
        spread(&work.join("reports")),
    );
    println!(
        "slurm: cluster up after {:.1} s, job array done after {:.1} s, {:.1} s in all",
        up.as_secs_f64(),
        array_done.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// `sh -e -c SCRIPT` in `dir`, with the `profconv` under test first on
/// `PATH` (which `sbatch` passes on to the jobs).
fn shell(script: &str, dir: &Path) -> Command {
    let bin = profconv_bin();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs =
        std::iter::once(bin.parent().unwrap().to_path_buf()).chain(std::env::split_paths(&path));
    let mut sh = Command::new("sh");
    sh.args(["-e", "-c", script])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(dirs).unwrap());
    // A test run inside a job of another cluster (or a Kubernetes Indexed
    // Job) must not hand its index or its cluster to these jobs:
    // `--shard auto` reads JOB_COMPLETION_INDEX before SLURM_ARRAY_TASK_ID.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("SLURM_") || key.starts_with("SBATCH_") || key == "JOB_COMPLETION_INDEX"
        {
            sh.env_remove(&*key);
        }
    }
    sh
}

/// The merged report (`report.json`) is the one-machine run's
/// (`one.json`): input for input, and whole but for times and the output
/// folder; the outputs (`out/`, `one/`) are the same files, byte for byte.
fn assert_same_as_one_run(work: &Path, inputs: usize) {
    let merged = report(&work.join("report.json"));
    let whole = report(&work.join("one.json"));
    assert_eq!(records(&merged).len(), inputs, "{merged:#}");
    assert_eq!(records(&merged), records(&whole));
    // Cut by bytes: no shard above the mean by more than one input (here
    // a DCPI database larger than the mean, which no cut can split).
    let bytes = |r: &Value| r["bytes"].as_u64().unwrap();
    let sizes: Vec<u64> = merged["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(bytes)
        .collect();
    let largest = sizes.iter().max().unwrap();
    let mean = sizes.iter().sum::<u64>() / SHARDS as u64;
    for share in merged["shards"].as_array().unwrap() {
        assert!(
            bytes(share) <= mean + largest + inputs as u64,
            "{share} against a mean of {mean} bytes: {:#}",
            merged["shards"]
        );
    }
    let mut merged = merged;
    merged["shards"] = Value::Array(Vec::new());
    merged["shard_spread"] = Value::Null;
    assert_eq!(without_timings(merged), without_timings(whole));
    let (sharded, alone) = (tree(&work.join("out")), tree(&work.join("one")));
    assert_eq!(
        sharded.keys().collect::<Vec<_>>(),
        alone.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &alone {
        assert!(
            sharded[name] == *bytes,
            "out/{name} differs from one/{name}"
        );
    }
}

/// Builds the archive: 29 profiles of the four formats in nested folders,
/// of different sizes (GNU and 4.4BSD gmon.out, mpatrol of each word size
/// and byte order, APS captures of two CPUs' files, DCPI databases), and a
/// note that is not a profile. Returns the number of units (a folder for
/// APS and DCPI) a run reports.
fn make_archive(root: &Path) -> usize {
    use common::gen::{dcpi, gprof, mpatrol};
    let write = |rel: String, bytes: Vec<u8>| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    let little = gprof::Layout {
        big: false,
        word: 8,
    };
    for i in 0..12u64 {
        let hist = gmon_hist(i);
        let arcs = [(0x40_0010, 0x40_0020 + 4 * i, i as u32 + 1)];
        let bytes = gprof::gnu(little, &[hist], &arcs, &[]);
        write(format!("gprof/{}/run-{i}/gmon.out", 2001 + i % 3), bytes);
    }
    for i in 0..4u64 {
        let big = gprof::Layout { big: true, word: 4 };
        let bytes = gprof::bsd44(big, &gmon_hist(i + 20), &[(0x40_0010, 0x40_0030, 3)]);
        write(format!("gprof/bsd/host-{i}.gmon"), bytes);
    }
    for (word, big) in [(4, false), (4, true), (8, false), (8, true)] {
        let bytes = mpatrol::encode(&mpatrol::example().raw(word), word, big);
        let order = if big { "be" } else { "le" };
        write(format!("heap/{}bit-{order}/mpatrol.out", word * 8), bytes);
    }
    for run in 0..6usize {
        for cpu in 0..2 {
            let name = format!("aps/2015/run-{run}/sample_cpu_{cpu}_20150716_130220");
            write(name, aps_file(1 + 40 * run + cpu));
        }
    }
    for site in ["alpha", "beta", "gamma"] {
        dcpi::make_db(&root.join(format!("dcpi/{site}/dcpidb")));
    }
    write(
        "notes/README.txt".into(),
        b"profiles of the old lab\n".to_vec(),
    );
    12 + 4 + 4 + 6 + 3 + 1
}

/// A histogram of 16 to 104 two-byte bins, some empty, from `seed`.
fn gmon_hist(seed: u64) -> common::gen::gprof::Hist {
    let n = 16 + 8 * seed;
    common::gen::gprof::Hist {
        low: 0x40_0000,
        high: 0x40_0000 + 2 * n,
        rate: 100,
        bins: (0..n).map(|j| ((j * 7 + seed) % 50) as u16).collect(),
    }
}

/// The programs the test runs, found on `PATH` or in the `sbin` folders
/// (which a non-login `PATH` may lack); `None`, after a note, when one is
/// missing or the test is not root, outside CI.
struct Tools {
    munged: PathBuf,
    mungekey: PathBuf,
    slurmctld: PathBuf,
    slurmd: PathBuf,
}

impl Tools {
    fn find() -> Option<Tools> {
        let why = match Self::look() {
            Ok(tools) => return Some(tools),
            Err(why) => why,
        };
        assert!(
            !in_ci(),
            "the Slurm test cannot run under CI: {why} (.ci/run installs slurmctld slurmd slurm-client munge; the daemons need root)"
        );
        skip_note!("skipping the Slurm cluster test: {why}");
        None
    }

    fn look() -> Result<Tools, String> {
        for client in ["sbatch", "sinfo", "squeue", "scancel"] {
            find_tool(client).ok_or(format!(
                "{client} is not installed (apt-get install slurm-client)"
            ))?;
        }
        let daemon = |name: &str, package: &str| {
            find_tool(name).ok_or(format!(
                "{name} is not installed (apt-get install {package})"
            ))
        };
        let tools = Tools {
            munged: daemon("munged", "munge")?,
            mungekey: daemon("mungekey", "munge")?,
            slurmctld: daemon("slurmctld", "slurmctld")?,
            slurmd: daemon("slurmd", "slurmd")?,
        };
        use std::os::unix::fs::MetadataExt;
        let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
        if uid != 0 {
            return Err(format!(
                "not root (uid {uid}): slurmd runs jobs as their user and must be root"
            ));
        }
        Ok(tools)
    }
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A running one-node cluster: munged, slurmctld and slurmd, children of
/// the test, their standard error in `slurm-N/NAME.log` (Slurm's daemons
/// also write `NAME.file.log`, with times). Dropping it stops them.
struct Cluster {
    /// The test's folder, where jobs run: nothing may be left running in it.
    work: PathBuf,
    /// `work/slurm-N`: configuration, key, sockets, state, logs.
    dir: PathBuf,
    node: String,
    daemons: Vec<(&'static str, Child)>,
}

impl Cluster {
    /// Starts the cluster and waits until its node is idle. Ports are
    /// chosen free, but another program may take one first: such a start
    /// is tried again with others.
    fn start(tools: &Tools, work: &Path) -> Cluster {
        let mut attempt = 0;
        loop {
            let mut cluster = Cluster {
                work: work.to_path_buf(),
                dir: work.join(format!("slurm-{attempt}")),
                node: node_name(),
                daemons: Vec::new(),
            };
            match cluster.start_daemons(tools) {
                Ok(()) => return cluster,
                Err(why) => {
                    let logs = cluster.logs();
                    let left = cluster.stop();
                    attempt += 1;
                    if attempt < 3 && logs.contains("Address already in use") {
                        continue;
                    }
                    panic!("the cluster did not start: {why}\n{logs}\nleft running: {left:?}");
                }
            }
        }
    }

    fn start_daemons(&mut self, tools: &Tools) -> Result<(), String> {
        let d = self.dir.clone();
        for (sub, mode) in [
            ("", 0o755),
            ("key", 0o700),
            ("run", 0o755),
            ("state", 0o755),
            ("spool", 0o755),
        ] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
            set_mode(&d.join(sub), mode);
        }
        // munged refuses a socket whose folders are not searchable by all.
        set_mode(&self.work, 0o755);
        let key = d.join("key/munge.key");
        let made = Command::new(&tools.mungekey)
            .arg("-c")
            .arg("-k")
            .arg(&key)
            .output();
        match made {
            Ok(o) if o.status.success() => {}
            other => return Err(format!("mungekey -c: {other:?}")),
        }
        let socket = d.join("run/munge.sock");
        let mut munged = Command::new(&tools.munged);
        munged
            .arg("-F")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", d.join("run/munged.pid").display()))
            .arg(format!(
                "--seed-file={}",
                d.join("run/munged.seed").display()
            ));
        self.spawn("munged", &mut munged)?;
        self.wait_for("munged's socket", || Ok(socket.exists()))?;
        let conf = self.conf();
        std::fs::write(&conf, slurm_conf(&d, &self.node)).unwrap();
        let mut slurmctld = Command::new(&tools.slurmctld);
        slurmctld.arg("-D").arg("-f").arg(&conf);
        self.spawn("slurmctld", &mut slurmctld)?;
        let mut slurmd = Command::new(&tools.slurmd);
        slurmd
            .arg("-D")
            .arg("-f")
            .arg(&conf)
            .arg("-N")
            .arg(&self.node);
        self.spawn("slurmd", &mut slurmd)?;
        let mut sinfo = self.client("sinfo");
        sinfo.args(["-h", "-N", "-n", &self.node, "-o", "%T"]);
        self.wait_for("the node to be idle in sinfo", || {
            let out = run(&mut sinfo, Duration::from_secs(30))?;
            Ok(String::from_utf8_lossy(&out.stdout).trim() == "idle")
        })
    }

    fn spawn(&mut self, name: &'static str, command: &mut Command) -> Result<(), String> {
        let log = File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = command
            .env("SLURM_CONF", self.conf())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{name} does not start: {e}"))?;
        self.daemons.push((name, child));
        Ok(())
    }

    /// Polls `ready` until it holds, failing when a daemon has ended or
    /// after [`START_LIMIT`].
    fn wait_for(
        &mut self,
        what: &str,
        mut ready: impl FnMut() -> Result<bool, String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            for (name, child) in &mut self.daemons {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("{name} ended ({status}) while waiting for {what}"));
                }
            }
            if ready()? {
                return Ok(());
            }
            if start.elapsed() > START_LIMIT {
                return Err(format!("no {what} after {START_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The configuration the daemons and the clients read (`SLURM_CONF`).
    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// A client command (`sinfo`, `scancel`, …) of this cluster, run in the
    /// test's folder.
    fn client(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .env("SLURM_CONF", self.conf())
            .current_dir(&self.work);
        command
    }

    /// [`run`], failing the test with the logs when it does not end.
    fn within(&self, command: &mut Command, limit: Duration, what: &str) -> Output {
        run(command, limit).unwrap_or_else(|why| panic!("{what}: {why}\n{}", self.logs()))
    }

    /// Everything worth reading when something went wrong: each daemon's
    /// log (Slurm's own, with times, when it has begun one), the queue, and
    /// the jobs' output (`slurm-JOB_TASK.out`).
    fn logs(&self) -> String {
        let mut files: Vec<PathBuf> = ["munged", "slurmctld", "slurmd"]
            .iter()
            .map(|name| {
                let own = self.dir.join(format!("{name}.file.log"));
                let begun = std::fs::metadata(&own).is_ok_and(|m| m.len() > 0);
                if begun {
                    own
                } else {
                    self.dir.join(format!("{name}.log"))
                }
            })
            .collect();
        let mut jobs: Vec<PathBuf> = std::fs::read_dir(&self.work)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".out"))
            .collect();
        jobs.sort();
        files.extend(jobs);
        let mut all = String::new();
        for file in files {
            let body = std::fs::read_to_string(&file).unwrap_or_else(|e| format!("({e})"));
            let lines: Vec<&str> = body.lines().collect();
            let tail = lines[lines.len().saturating_sub(80)..].join("\n");
            all.push_str(&format!("--- {} ---\n{tail}\n", file.display()));
        }
        if self.daemons.iter().any(|(n, _)| *n == "slurmctld") {
            for program in ["squeue", "sinfo"] {
                let shown = run(&mut self.client(program), Duration::from_secs(15));
                let shown = shown.map_or_else(|e| e, |o| text(&o));
                all.push_str(&format!("--- {program} ---\n{shown}\n"));
            }
        }
        all
    }

    /// Cancels the jobs, stops the daemons (TERM, then KILL after 20 s) and
    /// kills whatever still runs in the test's folder; returns what had to
    /// be killed so (`PID COMMAND`), which a normal end must not have.
    fn stop(&mut self) -> Vec<String> {
        if self.daemons.iter().any(|(n, _)| *n == "slurmctld") {
            // slurmd leaves running jobs alone when it stops.
            let mut scancel = self.client("scancel");
            scancel.args(["--user", "root"]);
            let _ = run(&mut scancel, Duration::from_secs(30));
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(30) {
                let queue = run(self.client("squeue").arg("-h"), Duration::from_secs(15));
                if queue.is_ok_and(|o| o.status.success() && o.stdout.is_empty()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        while let Some((_, mut child)) = self.daemons.pop() {
            signal("TERM", &child.id().to_string());
            let start = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let left = running_in(&self.work);
        for (pid, _) in &left {
            signal("KILL", &pid.to_string());
        }
        left.into_iter()
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let left = self.stop();
        if !left.is_empty() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "slurm test: killed what was left: {left:?}"
            );
        }
    }
}

/// The cluster's configuration: one node of this machine's CPUs, reached
/// at 127.0.0.1 on free ports; everything Slurm keeps in `dir`; no
/// cgroups, no accounting, no systemd (a container has none of them).
/// Two settings only make the test quicker: `batch_sched_delay=0` starts
/// the next tasks as soon as a CPU is free (3 s later by default), and
/// `MinJobAge=5` (ended jobs forgotten after 5 s rather than 300) keeps
/// `sbatch --wait` polling every 2 s, where it would wait 2, 8, then 32 s
/// between polls (its sleep grows while under half of `MinJobAge`). A task
/// forgotten before `sbatch` saw it end would hide its exit code, but not
/// its report, which the test reads.
fn slurm_conf(dir: &Path, node: &str) -> String {
    let (ctld, slurmd) = free_ports();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let d = dir.display();
    format!(
        "ClusterName=profconv{pid}
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/run/munge.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd.pid
SlurmctldLogFile={d}/slurmctld.file.log
SlurmdLogFile={d}/slurmd.file.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=5
SchedulerParameters=batch_sched_delay=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
",
        pid = std::process::id(),
    )
}

/// This machine's short host name: slurmctld runs only where
/// `SlurmctldHost` names the host it runs on.
fn node_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let short = name.trim().split('.').next().unwrap_or("");
    if short.is_empty() { "localhost" } else { short }.to_owned()
}

/// Two ports free now, distinct (both held while the second is chosen).
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let b = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Sends `kill -SIGNAL TARGET` (a pid, or `-PGID` for a process group).
fn signal(name: &str, target: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), "--", target])
        .stderr(Stdio::null())
        .status();
}

/// The processes (other than this one) working in `dir` or naming it on
/// their command line: the daemons, `slurmstepd` and the jobs.
fn running_in(dir: &Path) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let needle = dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let cmd = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cwd.starts_with(dir) || cmd.contains(&needle) {
            found.push((pid, cmd.trim().to_owned()));
        }
    }
    found
}

/// Runs `command` for at most `limit`, killing its process group after.
fn run(command: &mut Command, limit: Duration) -> Result<Output, String> {
    use std::os::unix::process::CommandExt;
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{command:?} does not start: {e}"))?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if start.elapsed() > limit {
            signal("KILL", &format!("-{}", child.id()));
            let _ = child.wait();
            return Err(format!("{command:?} still running after {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().map_err(|e| e.to_string())
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Each input's path with its status and outputs.
fn records(report: &Value) -> BTreeMap<String, (Value, Value)> {
    let inputs = report["inputs"].as_array().expect("inputs");
    inputs
        .iter()
        .map(|r| {
            let path = r["path"].as_str().expect("path").to_owned();
            (path, (r["status"].clone(), r["outputs"].clone()))
        })
        .collect()
}

/// A report without what differs between any two runs: the times and the
/// output folder's name.
fn without_timings(mut report: Value) -> Value {
    report["seconds"] = Value::Null;
    report["out_dir"] = Value::Null;
    for r in report["inputs"].as_array_mut().unwrap() {
        r["seconds"] = Value::Null;
    }
    report
}

/// Every file below `dir` but the stamps of `.profconv/`: relative path →
/// bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.ends_with(".profconv") {
                continue;
            } else if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Each shard's inputs and their bytes, from its report: `0: 4 (1234 B), …`.
fn spread(reports: &Path) -> String {
    (0..SHARDS)
        .map(|k| {
            let shard = report(&reports.join(format!("{k}.json")));
            let inputs = shard["inputs"].as_array().unwrap();
            let bytes: u64 = inputs.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
            format!("{k}: {} ({bytes} B)", inputs.len())
        })
        .collect::<Vec<_>>()
        .join(", ")
}
