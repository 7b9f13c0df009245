//! The documents hold the table: podscopectl(1), the usage and the bash,
//! zsh and fish completions name every command and alias of `spec::ROOT`,
//! every spelling of each command's flags in that command's own part of
//! the document (its man page entry, its usage lines, its completion case),
//! the global flags anywhere, and no long option the table lacks. The
//! lists come from the table, never from a copy.

use super::spec::{Command, ROOT};
use super::USAGE;

const MAN: &str = include_str!("../../../man/podscopectl.1");
const BASH: &str = include_str!("../../../completions/podscopectl.bash");
const ZSH: &str = include_str!("../../../completions/_podscopectl");
const FISH: &str = include_str!("../../../completions/podscopectl.fish");

/// Long options the documents name that are another program's: journalctl's
/// (journal passes them on), fish's `string sub --length`.
const FOREIGN: &[&str] = &[
    "--no-pager",
    "--since",
    "--until",
    "--lines",
    "--output",
    "--priority",
    "--reverse",
    "--grep",
    "--length",
];

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// `w` in `text` as a whole word: `--tty` is not in `--ttyx`, `-t` is not
/// in `--tty`, `rm` is not in `perform`.
fn has_word(text: &str, w: &str) -> bool {
    text.match_indices(w).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + w.len()..].chars().next();
        !before.is_some_and(word_char) && !after.is_some_and(word_char)
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The man page as text: `\-` is `-`, font changes and `\&` are gone.
fn man_text() -> String {
    let mut t = MAN.replace("\\-", "-");
    for esc in ["\\fB", "\\fI", "\\fR", "\\fP", "\\&"] {
        t = t.replace(esc, "");
    }
    t.replace("\\(aq", "'")
}

/// Every command and verb: its path (["container", "create"]) and entry.
fn commands() -> Vec<(Vec<String>, &'static Command)> {
    ROOT.walk()
        .into_iter()
        .map(|(path, c)| (path.split_whitespace().map(str::to_owned).collect(), c))
        .collect()
}

/// How one document is checked.
struct Doc<'a> {
    /// Its name and file, for the message.
    name: &'a str,
    text: &'a str,
    /// Whether it names the command (a path, its last word the name or an
    /// alias).
    has_command: &'a dyn Fn(&[String]) -> bool,
    /// The command's own part of the document.
    section: &'a dyn Fn(&[String]) -> Option<String>,
    /// Whether a part spells the flag.
    has_flag: &'a dyn Fn(&str, &str) -> bool,
}

/// Panics naming everything of the table `doc` lacks, and where.
fn assert_complete(doc: &Doc) {
    let mut missing = Vec::new();
    for f in ROOT.flags {
        for name in f.names {
            if !(doc.has_flag)(doc.text, name) {
                missing.push(format!("global flag `{name}`"));
            }
        }
    }
    for (path, cmd) in commands() {
        let group = &path[..path.len() - 1];
        for name in std::iter::once(&cmd.name).chain(cmd.aliases) {
            let mut full = group.to_vec();
            full.push((*name).to_owned());
            if !(doc.has_command)(&full) {
                missing.push(format!("command `{}`", full.join(" ")));
            }
        }
        if cmd.flags.is_empty() {
            continue;
        }
        let Some(section) = (doc.section)(&path) else {
            missing.push(format!("a part for `{}` (its flags)", path.join(" ")));
            continue;
        };
        for f in cmd.flags {
            for name in f.names {
                if !(doc.has_flag)(&section, name) {
                    missing.push(format!("flag `{name}` in `{}`'s part", path.join(" ")));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} lacks what podscopectl's table (crates/cli/src/spec.rs) has:\n  {}",
        doc.name,
        missing.join("\n  ")
    );
}

/// The long options `doc` names, each in the table or in FOREIGN.
fn assert_no_stale_long_options(doc: &str, longs: Vec<String>) {
    let mut known: Vec<&str> = ROOT
        .flags
        .iter()
        .flat_map(|f| f.names.iter().copied())
        .collect();
    for (_, c) in commands() {
        known.extend(c.flags.iter().flat_map(|f| f.names.iter().copied()));
    }
    let mut stale: Vec<String> = longs
        .into_iter()
        .filter(|l| !known.contains(&l.as_str()) && !FOREIGN.contains(&l.as_str()))
        .collect();
    stale.sort();
    stale.dedup();
    assert!(
        stale.is_empty(),
        "{doc} names long options podscopectl's table does not have: {stale:?}"
    );
}

/// Every `--name` in `text`, at a word's start.
fn long_options(text: &str) -> Vec<String> {
    text.match_indices("--")
        .filter(|(i, _)| !text[..*i].chars().next_back().is_some_and(word_char))
        .map(|(i, _)| {
            let tail = &text[i + 2..];
            let end = tail.find(|c| !word_char(c)).unwrap_or(tail.len());
            format!("--{}", &tail[..end])
        })
        .filter(|o| o.len() > 2 && o.as_bytes()[2].is_ascii_alphabetic())
        .collect()
}

/// The command an entry starts with, a position per word, each with its
/// alternatives: "rm | remove ID..." is [[rm, remove]], "container
/// rm|remove ID..." [[container], [rm, remove]], "list [--state" [[list]].
fn lead(entry: &str) -> Vec<Vec<String>> {
    let entry = entry.replace('"', " ");
    let entry = entry.split_whitespace().collect::<Vec<_>>().join(" ");
    let entry = entry.replace(" | ", "|");
    let mut out = Vec::new();
    for w in entry.split_whitespace() {
        let alts: Vec<&str> = w.split('|').collect();
        if !alts
            .iter()
            .all(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase()))
        {
            break;
        }
        out.push(alts.into_iter().map(str::to_owned).collect());
    }
    out
}

/// Whether an entry starting with `lead` is the command `path`, or for a
/// group (`container`), one of its verbs.
fn leads_with(lead: &[Vec<String>], path: &[String]) -> bool {
    let group = ROOT
        .find(&path[0])
        .is_some_and(|c| path.len() == 1 && !c.subcommands.is_empty());
    let len_ok = if group {
        lead.len() >= path.len()
    } else {
        lead.len() == path.len()
    };
    len_ok && lead.iter().zip(path).all(|(alts, w)| alts.contains(w))
}

/// The lines after each `.TP`: the entries' tags.
fn man_tags(man: &str) -> Vec<&str> {
    let lines: Vec<&str> = man.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .map(|w| w[1])
        .collect()
}

/// A command's part of the man page: its entry (its tag starts with the
/// path, after the macro; the entry runs to the next `.TP` outside
/// `.RS`/`.RE`, or `.SH`), and a section `NAME OPTIONS` if there is one.
fn man_section(man: &str, path: &[String]) -> Option<String> {
    let lines: Vec<&str> = man.lines().collect();
    let name = path.join(" ");
    let starts_entry = |tag: &str| {
        let body = tag
            .split_once(' ')
            .map_or("", |(_, b)| b)
            .trim_start_matches('"');
        body.starts_with(&name) && !body[name.len()..].starts_with(word_char)
    };
    let start = (1..lines.len()).find(|&i| lines[i - 1] == ".TP" && starts_entry(lines[i]))?;
    let mut out = vec![lines[start]];
    let mut depth = 0;
    for l in &lines[start + 1..] {
        if l.starts_with(".SH") || (*l == ".TP" && depth == 0) {
            break;
        }
        depth += i32::from(l.starts_with(".RS")) - i32::from(l.starts_with(".RE"));
        out.push(l);
    }
    let title = format!(".SH {} OPTIONS", name.to_uppercase());
    if let Some(i) = lines.iter().position(|l| *l == title) {
        out.extend(lines[i + 1..].iter().take_while(|l| !l.starts_with(".SH")));
    }
    Some(out.join("\n"))
}

/// A command's lines of the usage: the one (indented two) that starts
/// with it, and those indented deeper after it.
fn usage_section(path: &[String]) -> Option<String> {
    let lines: Vec<&str> = USAGE.lines().collect();
    let name = path.join(" ");
    let start = lines.iter().position(|l| {
        indent(l) == 2 && l.trim_start().starts_with(&path[0]) && has_word(l, &name)
    })?;
    let more = lines[start + 1..].iter().take_while(|l| indent(l) > 2);
    Some(
        std::iter::once(&lines[start])
            .chain(more)
            .copied()
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The `NAME)` arm of a shell `case` (the outermost one naming it, as
/// `a|b)`), to the next line indented no deeper than it (the next arm or
/// `esac`).
fn case_arm(text: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let labels = |l: &str| {
        let t = l.trim();
        let body = t.strip_suffix(')')?;
        body.chars()
            .all(|c| c.is_ascii_lowercase() || c == '|' || c == '-')
            .then(|| body.split('|').any(|n| n == name))
    };
    let (start, at) = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| labels(l) == Some(true))
        .map(|(i, l)| (i, indent(l)))
        .min_by_key(|(_, at)| *at)?;
    let body = lines[start + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) > at);
    Some(
        std::iter::once(&lines[start])
            .chain(body)
            .copied()
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// A command's part of a bash or zsh completion: its arm, within its
/// group's arm.
fn shell_section(text: &str, path: &[String]) -> Option<String> {
    path.iter()
        .try_fold(text.to_owned(), |text, word| case_arm(&text, word))
}

/// A command's part of the fish completion: the `complete` lines whose
/// condition has seen each word of its path and no group it is not in
/// (`create` is not `container create`).
fn fish_section(path: &[String]) -> Option<String> {
    let groups: Vec<&str> = commands()
        .into_iter()
        .filter(|(_, c)| !c.subcommands.is_empty())
        .map(|(_, c)| c.name)
        .collect();
    let lines: Vec<&str> = FISH
        .lines()
        .filter(|l| l.starts_with("complete "))
        .filter(|l| {
            let Some((_, cond)) = l.split_once("-n \"") else {
                return false;
            };
            let cond = cond.split('"').next().unwrap_or("");
            let seen: Vec<&str> = cond
                .split("; and ")
                .filter_map(|c| c.trim().strip_prefix("__fish_seen_subcommand_from "))
                .flat_map(str::split_whitespace)
                .collect();
            path.iter().all(|w| seen.contains(&w.as_str()))
                && seen
                    .iter()
                    .all(|w| !groups.contains(w) || path.iter().any(|p| p == w))
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[test]
fn the_checks_read_words_and_parts() {
    assert!(has_word("[-t|--tty]", "-t") && has_word("[-t|--tty]", "--tty"));
    assert!(!has_word("--ttyx", "--tty") && !has_word("--tty", "-t"));
    assert!(!has_word("perform", "rm") && has_word("rm|remove", "remove"));
    assert_eq!(long_options("a --env=x, -e, --; \\-\\-no --9"), ["--env"]);
    let path = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let arm = shell_section(BASH, &path("container create")).unwrap();
    assert!(
        arm.contains("--cpuset-cpus") && !arm.contains("--pids-limit"),
        "{arm}"
    );
    let arm = shell_section(BASH, &path("create")).unwrap();
    assert!(
        arm.contains("--pids-limit") && !arm.contains("--cpuset-cpus"),
        "{arm}"
    );
    let fish = fish_section(&path("update")).unwrap();
    assert!(
        fish.contains("-l pids-limit") && !fish.contains("-l cpuset-cpus"),
        "{fish}"
    );
    let man = man_section(&man_text(), &path("create")).unwrap();
    assert!(
        man.contains("--host-network") && !man.contains("--cap-add"),
        "{man}"
    );
    let usage = usage_section(&path("container stop")).unwrap();
    assert!(
        usage.contains("--timeout") && !usage.contains("--cpu-shares"),
        "{usage}"
    );
}

/// podscopectl(1): each command and alias in an entry's tag (`.TP`), each
/// flag's every spelling in its command's entry (`\-` read as `-`).
#[test]
fn the_man_page_has_every_command_alias_and_flag() {
    let man = man_text();
    let tags = man_tags(&man);
    assert_complete(&Doc {
        name: "podscopectl(1) (man/podscopectl.1)",
        text: &man,
        // A tag, after its macro, names the command first.
        has_command: &|c| {
            tags.iter().any(|t| {
                let body = t.split_once(' ').map_or("", |(_, b)| b);
                leads_with(&lead(body), c)
            })
        },
        section: &|p| man_section(&man, p),
        has_flag: &has_word,
    });
    assert_no_stale_long_options("podscopectl(1)", long_options(&man));
}

#[test]
fn the_usage_has_every_command_alias_and_flag() {
    assert_complete(&Doc {
        name: "the usage (USAGE in crates/cli/src/main.rs)",
        text: USAGE,
        // A command's line (indented two) names one or more commands,
        // each first in its column ("start ID...    stop ID...").
        has_command: &|c| {
            USAGE
                .lines()
                .filter(|l| indent(l) == 2)
                .flat_map(|l| l.split("   "))
                .any(|col| leads_with(&lead(col), c))
        },
        section: &usage_section,
        has_flag: &has_word,
    });
    assert_no_stale_long_options("the usage", long_options(USAGE));
}

/// The words of the bash completion's `local NAME="..."` list.
fn bash_list(name: &str) -> &'static str {
    let start = format!("local {name}=\"");
    let line = BASH
        .lines()
        .find(|l| l.trim_start().starts_with(&start))
        .unwrap_or_else(|| panic!("completions/podscopectl.bash has no `{start}...\"`"));
    line.trim_start()[start.len()..]
        .split('"')
        .next()
        .unwrap_or("")
}

/// The words bash offers in `text`: its `compgen -W "..."` lists (a flag
/// only tested in `$prev` is not offered).
fn bash_offered(text: &str) -> String {
    text.split("compgen -W \"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect::<Vec<_>>()
        .join(" ")
}

/// bash: commands in `local commands="..."`, a group's verbs in `local
/// GROUP_verbs="..."`, flags offered in the command's `case` arm.
#[test]
fn the_bash_completion_has_every_command_alias_and_flag() {
    let offered = bash_offered(BASH);
    assert_complete(&Doc {
        name: "the bash completion (completions/podscopectl.bash)",
        text: &offered,
        has_command: &|c| match c {
            [name] => has_word(bash_list("commands"), name),
            [group, name] => has_word(bash_list(&format!("{group}_verbs")), name),
            _ => false,
        },
        section: &|p| shell_section(BASH, p).map(|arm| bash_offered(&arm)),
        has_flag: &has_word,
    });
    assert_no_stale_long_options("the bash completion", long_options(BASH));
}

/// zsh: commands and verbs as `_describe` entries ('NAME:description'),
/// flags in the command's `case` arm (`'--env[...]'`, `{-e,--env}`).
#[test]
fn the_zsh_completion_has_every_command_alias_and_flag() {
    assert_complete(&Doc {
        name: "the zsh completion (completions/_podscopectl)",
        text: ZSH,
        // Top level: the `commands=(...)` list; a verb: its group's arm.
        has_command: &|c| {
            let text = match c {
                [_] => ZSH
                    .split_once("commands=(")
                    .and_then(|(_, t)| t.split_once("\n    )"))
                    .map(|(list, _)| list.to_owned()),
                _ => shell_section(ZSH, &c[..c.len() - 1]),
            };
            text.is_some_and(|t| t.contains(&format!("'{}:", c[c.len() - 1])))
        },
        section: &|p| shell_section(ZSH, p),
        has_flag: &has_word,
    });
    assert_no_stale_long_options("the zsh completion", long_options(ZSH));
}

/// fish: commands and verbs as `-a NAME`, long flags as `-l NAME`, short
/// ones as `-s X`, on the lines whose condition is the command's.
#[test]
fn the_fish_completion_has_every_command_alias_and_flag() {
    assert_complete(&Doc {
        name: "the fish completion (completions/podscopectl.fish)",
        text: FISH,
        // Top level: offered before any command, and in `$cmds` (which
        // the other lines' conditions use); a verb: on its group's lines.
        has_command: &|c| match c {
            [name] => {
                let cmds = FISH
                    .lines()
                    .find_map(|l| l.strip_prefix("set -l cmds "))
                    .unwrap_or("");
                has_word(cmds, name)
                    && FISH.lines().any(|l| {
                        l.contains("-n \"not __fish_seen_subcommand_from $cmds\"")
                            && has_word(l, &format!("-a {name}"))
                    })
            }
            _ => fish_section(&c[..c.len() - 1])
                .is_some_and(|t| has_word(&t, &format!("-a {}", c[c.len() - 1]))),
        },
        section: &fish_section,
        has_flag: &|text, f| match f.strip_prefix("--") {
            Some(long) => has_word(text, &format!("-l {long}")),
            None => has_word(text, &format!("-s {}", &f[1..])),
        },
    });
    // `-l NAME` on the `complete` lines (not `set -l`).
    let mut longs = long_options(FISH);
    for line in FISH.lines().filter(|l| l.starts_with("complete ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        longs.extend(
            words
                .windows(2)
                .filter(|w| w[0] == "-l")
                .map(|w| format!("--{}", w[1])),
        );
    }
    assert_no_stale_long_options("the fish completion", longs);
}
