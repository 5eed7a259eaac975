//! The Kubernetes manifests an operator applies (`deploy/kubernetes/`), checked by the
//! tools that know Kubernetes: each overlay renders with `kubectl kustomize`; every
//! rendered object validates offline against the Kubernetes 1.37 schemas
//! (`kubernetes-validate --strict`); `checkov` finds no failed check in the rendered
//! manifests nor in the Containerfiles (`deploy/containers/`), a skip only with its reason
//! in the file; the Prometheus scrape configuration passes `promtool check config`. The
//! two Python tools come pinned in the venv `scripts/test.sh` makes
//! (`EVIDENCE_DEPLOY_VENV`, by default `.tools/deploy-venv`).
//!
//! Beside the linters, what they cannot know: every secret of the package's auth binding
//! arrives as a file of a Secret volume of mode 0400 (`NAME_FILE`, never the variable),
//! the probes ask the operator listener, there is a Service per listener, and the
//! NetworkPolicy lets the pods reach only DNS, Redis and the package manifest's hosts.
//! And what only the server knows: it takes each overlay's arguments
//! (`HttpListen::from_args`, TLS on both listeners, the pod's address allowed as a Host)
//! and keeps each variable the overlay sets when it re-executes itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use evidence_tool::Tool;
use evidence_tool::mcp::{HttpListen, server_variables};
use yaml_rust2::{Yaml, YamlLoader};

/// The overlays, one per package: (overlay, package folder under `packages/`).
const OVERLAYS: [(&str, &str); 3] = [
    ("clinic", "managed_auto_oncall_clinic/v3"),
    ("manus", "managed_auto_oncall_manus/v2"),
    ("wetech", "managed_auto_oncall_wetech/v2"),
];

/// The environment variable naming the venv with `kubernetes-validate` and `checkov`.
const VENV_ENV: &str = "EVIDENCE_DEPLOY_VENV";
/// How that venv is made.
const INSTALL: &str = "python3 -m venv .tools/deploy-venv && .tools/deploy-venv/bin/pip install \
     kubernetes-validate==1.37.0 checkov==3.3.30 (or run scripts/test.sh)";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `program args`; `missing` says how to install it when it is not there, and a
/// failure carries the program's own words.
fn run(program: &Path, args: &[&str], missing: &str) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} ({missing})", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?}:\n{}",
        program.display(),
        text(&out)
    );
    text(&out)
}

/// A program of the deploy venv.
fn venv_tool(name: &str) -> PathBuf {
    let venv = std::env::var_os(VENV_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".tools/deploy-venv"));
    let tool = venv.join("bin").join(name);
    assert!(
        tool.is_file(),
        "no {} ({VENV_ENV} names the venv): {INSTALL}",
        tool.display()
    );
    tool
}

/// The overlay rendered by `kubectl kustomize` (kubectl 1.32 carries kustomize v5.5).
fn render(overlay: &str) -> String {
    let dir = format!("deploy/kubernetes/overlays/{overlay}");
    run(
        Path::new("kubectl"),
        &["kustomize", &dir],
        "kubectl with kustomize v5 is needed (/usr/bin/kubectl on the project's machines; \
         scripts/test.sh says when it is missing)",
    )
}

#[test]
fn every_overlay_renders_validates_against_the_schemas_and_passes_checkov() {
    // Not a hidden folder (tempdir's default ".tmp..."): checkov's Kubernetes scan
    // passes over those.
    let dir = tempfile::Builder::new()
        .prefix("deploy-kubernetes-")
        .tempdir()
        .unwrap();
    for (overlay, _) in OVERLAYS {
        std::fs::write(dir.path().join(format!("{overlay}.yaml")), render(overlay)).unwrap();
    }
    let files: Vec<String> = OVERLAYS
        .iter()
        .map(|(o, _)| dir.path().join(format!("{o}.yaml")).display().to_string())
        .collect();
    let mut args = vec!["--strict", "--quiet"];
    args.extend(files.iter().map(String::as_str));
    run(&venv_tool("kubernetes-validate"), &args, INSTALL);

    // checkov knows a Dockerfile only by a name holding "Dockerfile": it scans copies
    // of the Containerfiles named so, beside the rendered manifests, in one run.
    for (overlay, _) in OVERLAYS {
        let name = format!("{overlay}.Containerfile");
        std::fs::copy(
            repo().join("deploy/containers").join(&name),
            dir.path().join(format!("{name}.Dockerfile")),
        )
        .unwrap();
    }
    let scanned = dir.path().display().to_string();
    let report = run(
        &venv_tool("checkov"),
        &[
            "--directory",
            &scanned,
            "--framework",
            "kubernetes",
            "dockerfile",
            "--compact",
            "--quiet",
            "--skip-download",
        ],
        INSTALL,
    );
    // Both frameworks ran their checks (a file checkov does not recognize passes
    // silently), and none failed.
    for framework in ["kubernetes", "dockerfile"] {
        let section = report
            .split_once(&format!("{framework} scan results:"))
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("checkov scanned no {framework} file:\n{report}"));
        let count = |what: &str| -> u32 {
            section
                .split_once(&format!("{what} checks: "))
                .and_then(|(_, rest)| rest.split(',').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("checkov gave no {framework} count:\n{report}"))
        };
        assert!(
            count("Passed") > 0 && count("Failed") == 0,
            "checkov, {framework}:\n{report}"
        );
    }
}

#[test]
fn promtool_checks_the_scrape_configuration_and_it_names_each_operator_service() {
    run(
        Path::new("promtool"),
        &["check", "config", "deploy/kubernetes/prometheus/scrape.yml"],
        "apt-get install -y prometheus; bash scripts/test.sh installs it",
    );
    let scrape =
        std::fs::read_to_string(repo().join("deploy/kubernetes/prometheus/scrape.yml")).unwrap();
    for (overlay, _) in OVERLAYS {
        let service = format!("{overlay}-operator.managed-evidence.svc");
        assert!(
            scrape.contains(&format!("server_name: {service}\n"))
                && scrape.contains(&format!("names: [{service}.cluster.local]")),
            "scrape.yml: no job for {service}"
        );
    }
}

/// The rendered objects of `kind`.
fn objects<'a>(docs: &'a [Yaml], kind: &str) -> Vec<&'a Yaml> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect()
}

fn strings(list: &Yaml) -> Vec<&str> {
    list.as_vec()
        .map(|v| v.iter().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn secrets_are_files_probes_ask_the_operator_listener_and_egress_is_dns_redis_and_the_hosts() {
    for (overlay, package) in OVERLAYS {
        let docs = YamlLoader::load_from_str(&render(overlay)).unwrap();
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(repo().join("packages").join(package).join("manifest.json"))
                .unwrap(),
        )
        .unwrap();
        let deployment = objects(&docs, "Deployment");
        assert_eq!(deployment.len(), 1, "{overlay}: one Deployment");
        let pod = &deployment[0]["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let image = container["image"].as_str().unwrap();
        assert!(
            image.contains("@sha256:"),
            "{overlay}: image {image} has no digest"
        );
        let command = strings(&container["command"]);
        assert_eq!(
            command,
            [format!(
                "/srv/managed-evidence/{}/{}",
                package
                    .replace("managed_auto_oncall_", "")
                    .replace('/', "-"),
                manifest["entrypoint"].as_str().unwrap()
            )],
            "{overlay}: the command is the deployable folder's entrypoint"
        );

        // Every secret, and the Redis URL of the turn ledger, is NAME_FILE naming a file
        // of a Secret volume of mode 0400.
        let env = container["env"].as_vec().unwrap();
        let value = |name: &str| {
            env.iter()
                .find(|e| e["name"].as_str() == Some(name))
                .map(|e| e["value"].as_str().unwrap_or_default().to_owned())
        };
        let mounts = container["volumeMounts"].as_vec().unwrap();
        let volumes = pod["volumes"].as_vec().unwrap();
        let mut secrets: Vec<&str> = manifest["auth"]["secrets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["env"].as_str().unwrap())
            .collect();
        secrets.push("EVIDENCE_TURN_LEDGER");
        for secret in secrets {
            assert_eq!(
                value(secret),
                None,
                "{overlay}: {secret} is in the environment"
            );
            let file = value(&format!("{secret}_FILE"))
                .unwrap_or_else(|| panic!("{overlay}: no {secret}_FILE"));
            let (dir, name) = file.rsplit_once('/').unwrap();
            let mount = mounts
                .iter()
                .find(|m| m["mountPath"].as_str() == Some(dir))
                .unwrap_or_else(|| {
                    panic!("{overlay}: {secret}_FILE={file}: nothing mounted at {dir}")
                });
            let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
            let secret_volume = &volume["secret"];
            assert_eq!(
                secret_volume["defaultMode"].as_i64(),
                Some(0o400),
                "{overlay}: {secret}_FILE is not in a Secret volume of mode 0400"
            );
            assert!(
                secret_volume["items"]
                    .as_vec()
                    .unwrap()
                    .iter()
                    .any(|i| i["path"].as_str() == Some(name)),
                "{overlay}: the Secret volume has no item {name}"
            );
        }

        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &container[probe]["httpGet"];
            assert_eq!(
                (
                    get["path"].as_str(),
                    get["port"].as_str(),
                    get["scheme"].as_str()
                ),
                (Some(path), Some("operator"), Some("HTTPS")),
                "{overlay}: {probe}"
            );
        }
        let mut ports: Vec<&str> = objects(&docs, "Service")
            .iter()
            .flat_map(|s| s["spec"]["ports"].as_vec().unwrap())
            .filter_map(|p| p["targetPort"].as_str())
            .collect();
        ports.sort_unstable();
        assert_eq!(
            ports,
            ["mcp", "operator"],
            "{overlay}: a Service per listener"
        );
        assert_eq!(objects(&docs, "PodDisruptionBudget").len(), 1, "{overlay}");

        // Egress: DNS on 53, Redis, and one ipBlock on 443 per manifest host; every rule
        // names its peers (a rule without `to` would allow any).
        let policy = objects(&docs, "NetworkPolicy");
        assert_eq!(policy.len(), 1, "{overlay}: one NetworkPolicy");
        let spec = &policy[0]["spec"];
        assert_eq!(
            strings(&spec["policyTypes"]),
            ["Ingress", "Egress"],
            "{overlay}"
        );
        let mut provider_blocks = 0;
        for rule in spec["egress"].as_vec().unwrap() {
            let peers = rule["to"]
                .as_vec()
                .unwrap_or_else(|| panic!("{overlay}: an egress rule to anywhere"));
            let ports: Vec<i64> = rule["ports"]
                .as_vec()
                .unwrap()
                .iter()
                .map(|p| p["port"].as_i64().unwrap())
                .collect();
            match ports.as_slice() {
                [53, 53] | [6379] => {}
                [443] => {
                    // One host each: a /32 (or /128), never a network.
                    assert!(
                        peers.iter().all(|p| p["ipBlock"]["cidr"]
                            .as_str()
                            .is_some_and(|c| c.ends_with("/32") || c.ends_with("/128"))),
                        "{overlay}: a provider ipBlock wider than one host: {peers:?}"
                    );
                    provider_blocks += peers.len();
                }
                other => panic!("{overlay}: egress to ports {other:?}"),
            }
        }
        let hosts = manifest["network"]["hosts"].as_array().unwrap();
        assert_eq!(
            provider_blocks,
            hosts.len(),
            "{overlay}: one ipBlock per manifest host {hosts:?}"
        );
        let egress = std::fs::read_to_string(
            repo().join(format!("deploy/kubernetes/overlays/{overlay}/egress.yaml")),
        )
        .unwrap();
        for host in hosts {
            let host = host.as_str().unwrap();
            assert!(
                egress
                    .lines()
                    .any(|l| l.starts_with('#') && l.contains(host)),
                "{overlay}/egress.yaml names no address for {host}"
            );
        }
        // Ingress: the MCP port from one namespace, the operator port from pods of named
        // namespaces only.
        for rule in spec["ingress"].as_vec().unwrap() {
            let from = rule["from"]
                .as_vec()
                .unwrap_or_else(|| panic!("{overlay}: an ingress rule from anywhere"));
            match rule["ports"][0]["port"].as_str() {
                Some("mcp") => assert_eq!(from.len(), 1, "{overlay}: mcp from one namespace"),
                Some("operator") => assert!(
                    from.iter().all(|p| !p["namespaceSelector"].is_badvalue()
                        && !p["podSelector"].is_badvalue()),
                    "{overlay}: the operator port from named pods only"
                ),
                other => panic!("{overlay}: ingress to port {other:?}"),
            }
        }
    }
}

#[test]
fn the_server_takes_each_overlays_arguments_and_keeps_its_variables() {
    for (overlay, _) in OVERLAYS {
        let docs = YamlLoader::load_from_str(&render(overlay)).unwrap();
        let container =
            &objects(&docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0];
        let program = strings(&container["command"])[0];
        let tool = Tool::ALL
            .into_iter()
            .find(|t| program.ends_with(&format!("/{}", t.binary_name())))
            .unwrap_or_else(|| panic!("{overlay}: {program} is no tool binary"));
        // Kubernetes puts the pod's address in for $(POD_IP).
        let args: Vec<String> = strings(&container["args"])
            .iter()
            .map(|a| a.replace("$(POD_IP)", "10.0.0.7"))
            .collect();
        assert_eq!(args[0], "--mcp-http", "{overlay}: {args:?}");
        let rest: Vec<std::ffi::OsString> = args[1..].iter().map(Into::into).collect();
        let listen = HttpListen::from_args(&rest)
            .unwrap_or_else(|e| panic!("{overlay}: the server refuses {args:?}: {e}"));
        assert_eq!(
            listen.scheme(),
            "https",
            "{overlay}: both listeners serve TLS"
        );
        let operator = listen.operator().unwrap();
        assert!(
            listen
                .operator_hosts(operator)
                .iter()
                .any(|h| h == "10.0.0.7"),
            "{overlay}: probes and Prometheus reach the operator listener by the pod's address"
        );
        // The server re-executes itself with only its own package's variables (the
        // NAME_FILE forms of its secrets among them): one it would drop is a setting lost.
        let kept = server_variables(tool);
        let config = objects(&docs, "ConfigMap")
            .into_iter()
            .find(|c| {
                c["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("-config-"))
            })
            .unwrap();
        let names = container["env"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .chain(
                config["data"]
                    .as_hash()
                    .unwrap()
                    .keys()
                    .map(|k| k.as_str().unwrap()),
            );
        for name in names {
            assert!(
                // POD_IP only feeds $(POD_IP) in the arguments.
                kept.contains(&name) || name == "POD_IP",
                "{overlay}: {tool:?}'s server does not keep {name}"
            );
        }
    }
}
