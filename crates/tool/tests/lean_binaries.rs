//! Each tool binary holds only its own package's connector: `clinic-tool` none of the
//! Manus sealer or the WebDriver client, `manus-tool` none of the Clinic or Wetech
//! connectors, `wetech-tool` none of the HTTP connectors. The binary names its tool as a
//! type, so the others' code is never reached and the linker leaves it out. Read from
//! the symbol tables of the built binaries with binutils' `nm`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

const INSTALL: &str = "apt-get install -y binutils";

/// The demangled symbol names of `bin`.
fn symbols(bin: &str) -> String {
    let out = Command::new("nm")
        .args(["--demangle", bin])
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm ({e}): {INSTALL}"));
    assert!(
        out.status.success(),
        "nm {bin}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Marks of each connector's code in a symbol table.
const MARKS: [(&str, &[&str]); 3] = [
    ("clinic", &["ClinicConnector"]),
    (
        "manus",
        &["ManusConnector", "ReferenceKeyRing", " aes_gcm::"],
    ),
    ("wetech", &["WetechConnector", "fantoccini::"]),
];

#[test]
fn each_tool_binary_links_only_its_own_connector() {
    let binaries = [
        ("clinic", env!("CARGO_BIN_EXE_clinic-tool")),
        ("manus", env!("CARGO_BIN_EXE_manus-tool")),
        ("wetech", env!("CARGO_BIN_EXE_wetech-tool")),
    ];
    for (tool, bin) in binaries {
        let table = symbols(bin);
        for (connector, marks) in MARKS {
            let own = connector == tool;
            // Its own connector's type is there; the other connectors' code is not.
            let found: Vec<&&str> = marks.iter().filter(|m| table.contains(**m)).collect();
            if own {
                assert!(table.contains(marks[0]), "{tool}-tool lacks {}", marks[0]);
            } else {
                assert!(found.is_empty(), "{tool}-tool links {connector}: {found:?}");
            }
        }
    }
}
