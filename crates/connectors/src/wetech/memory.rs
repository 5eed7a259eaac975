//! The memory of a browser's process tree: the browser process (the session's
//! `goog:processID`) and every process below it, as the sum of their proportional set
//! sizes (`Pss` of `/proc/<pid>/smaps_rollup`, shared pages split between the processes
//! that map them, so a sum does not count them twice). Linux only; elsewhere, or for a
//! tree that cannot be read, there is no figure.

use std::collections::{BTreeMap, BTreeSet};

/// The parent of each process now running, from `/proc/<pid>/stat`.
fn parents() -> BTreeMap<u32, u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_in_stat(&stat)?))
        })
        .collect()
}

/// The parent pid in a `/proc/<pid>/stat` line: the second field after the command
/// name, which is in parentheses and may itself hold spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `root` and every process below it.
pub(crate) fn tree_of(root: u32) -> BTreeSet<u32> {
    let parents = parents();
    let mut tree = BTreeSet::from([root]);
    loop {
        let before = tree.len();
        for (pid, parent) in &parents {
            if tree.contains(parent) {
                tree.insert(*pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// The `Pss` of one process in KiB, from `/proc/<pid>/smaps_rollup`.
fn pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    pss_in_rollup(&text)
}

fn pss_in_rollup(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The summed `Pss` of `root`'s process tree in MiB, `None` when the root cannot be
/// read (gone, or not Linux).
pub(crate) fn tree_pss_mib(root: u32) -> Option<u64> {
    let root_pss = pss_kib(root)?;
    let rest: u64 = tree_of(root)
        .into_iter()
        .filter(|p| *p != root)
        .filter_map(pss_kib)
        .sum();
    Some((root_pss + rest) / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stat_and_rollup_lines() {
        assert_eq!(parent_in_stat("42 (chrome (x) y) S 7 42 42 0"), Some(7));
        assert_eq!(parent_in_stat("garbage"), None);
        let rollup = "00400000-7fff [rollup]\nRss:  2048 kB\nPss:  1024 kB\nPss_Anon: 5 kB\n";
        assert_eq!(pss_in_rollup(rollup), Some(1024));
        assert_eq!(pss_in_rollup("Rss: 1 kB\n"), None);
    }

    #[test]
    fn this_process_has_a_tree_and_a_figure() {
        let me = std::process::id();
        assert!(tree_of(me).contains(&me));
        assert!(tree_pss_mib(me).is_some());
    }
}
