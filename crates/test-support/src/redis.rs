//! A real Redis for the tests of the shared turn ledger and session store: one
//! `redis-server` per test on a free loopback port, its data in a folder of its own,
//! with the persistence the ledger requires (the append-only file, fsynced at every
//! write), so a test can kill it and start it again on the same data, or stop it
//! (SIGSTOP) and let it go on (SIGCONT). Its other settings are Redis' defaults (among
//! them `maxmemory-policy noeviction`, which the ledger requires) unless a test names
//! some with [`RedisServer::start_with_config`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TestSupportError;
use crate::process::{find_program, free_loopback_port, log_tail};

/// The install command for Redis.
pub const REDIS_INSTALL: &str = "apt-get install -y redis-server";

/// How long a start waits for "Ready to accept connections".
const READY_WITHIN: Duration = Duration::from_secs(20);

/// TLS material of a server started with [`RedisServer::start_tls`] (PEM files).
#[derive(Debug, Clone)]
pub struct RedisTls {
    /// The server certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that signed it (what a client trusts).
    pub ca: PathBuf,
}

/// A running `redis-server` (see the module documentation). Killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    program: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    password: Option<String>,
    tls: Option<RedisTls>,
    config: Vec<(String, String)>,
    child: Option<Child>,
    starts: u32,
}

impl RedisServer {
    /// Starts a server without a password.
    pub fn start() -> Result<Self, TestSupportError> {
        Self::start_inner(None, None)
    }

    /// Starts a server that requires `password`.
    pub fn start_with_password(password: &str) -> Result<Self, TestSupportError> {
        Self::start_inner(Some(password.to_owned()), None)
    }

    /// Starts a server that speaks only TLS, with `tls`'s certificate.
    pub fn start_tls(tls: RedisTls) -> Result<Self, TestSupportError> {
        Self::start_inner(None, Some(tls))
    }

    /// Starts a server with these settings besides the usual ones (each `(name, value)`
    /// passed as `--name value`, e.g. `("maxmemory-policy", "allkeys-lru")`).
    pub fn start_with_config(config: &[(&str, &str)]) -> Result<Self, TestSupportError> {
        Self::start_configured(
            None,
            None,
            config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn start_inner(
        password: Option<String>,
        tls: Option<RedisTls>,
    ) -> Result<Self, TestSupportError> {
        Self::start_configured(password, tls, Vec::new())
    }

    fn start_configured(
        password: Option<String>,
        tls: Option<RedisTls>,
        config: Vec<(String, String)>,
    ) -> Result<Self, TestSupportError> {
        let program = find_program("redis-server", &["/usr/bin", "/usr/sbin"], REDIS_INSTALL)?;
        let dir = tempfile::tempdir()
            .map_err(|e| TestSupportError::io("creating the Redis folder", "/tmp", e))?;
        let mut server = RedisServer {
            program,
            dir,
            port: 0,
            password,
            tls,
            config,
            child: None,
            starts: 0,
        };
        let mut last = None;
        for _ in 0..5 {
            server.port = free_loopback_port()?;
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => {
                    let tail = log_tail(&server.log_path(), 4096);
                    if !tail.contains("Address already in use") {
                        return Err(e);
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or(TestSupportError::NotReady {
            program: "redis-server",
            detail: "no free port".to_owned(),
        }))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("redis-{}.log", self.starts))
    }

    fn spawn(&mut self) -> Result<(), TestSupportError> {
        self.starts += 1;
        let log = self.log_path();
        let port = self.port.to_string();
        let mut cmd = Command::new(&self.program);
        cmd.arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .args(["--save", ""])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--logfile")
            .arg(&log);
        match &self.tls {
            None => {
                cmd.arg("--port").arg(&port);
            }
            Some(tls) => {
                cmd.args(["--port", "0", "--tls-port"])
                    .arg(&port)
                    .arg("--tls-cert-file")
                    .arg(&tls.cert)
                    .arg("--tls-key-file")
                    .arg(&tls.key)
                    .arg("--tls-ca-cert-file")
                    .arg(&tls.ca)
                    .args(["--tls-auth-clients", "no"]);
            }
        }
        if let Some(password) = &self.password {
            cmd.arg("--requirepass").arg(password);
        }
        for (name, value) in &self.config {
            cmd.arg(format!("--{name}")).arg(value);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestSupportError::io("starting redis-server", &self.program, e))?;
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if std::fs::read_to_string(&log)
                .is_ok_and(|text| text.contains("Ready to accept connections"))
            {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || started.elapsed() > READY_WITHIN {
                self.kill();
                return Err(TestSupportError::NotReady {
                    program: "redis-server",
                    detail: log_tail(&log, 2048),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The URL of the server (`redis://` or `rediss://`, with the password when set).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        match &self.password {
            Some(p) => format!("{scheme}://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("{scheme}://127.0.0.1:{}/0", self.port),
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its data folder (the append-only file is there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it (SIGKILL: nothing is flushed but what was fsynced) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped process is killed all the same.
            let _killed = child.kill();
            let _waited = child.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) -> Result<(), TestSupportError> {
        self.kill();
        self.spawn()
    }

    /// Stops it (SIGSTOP): connections are accepted by the kernel, nothing answers.
    pub fn pause(&self) -> Result<(), TestSupportError> {
        self.signal("-STOP")
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) -> Result<(), TestSupportError> {
        self.signal("-CONT")
    }

    fn signal(&self, signal: &str) -> Result<(), TestSupportError> {
        let Some(pid) = self.pid() else {
            return Err(TestSupportError::Task(
                "redis-server is not running".to_owned(),
            ));
        };
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .map_err(|e| TestSupportError::io("signalling redis-server", "kill", e))?;
        if status.success() {
            Ok(())
        } else {
            Err(TestSupportError::Task(format!(
                "kill {signal} {pid}: {status}"
            )))
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
