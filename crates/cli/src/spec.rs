//! podscopectl's command line as data: every command (and `container`'s
//! verbs), its aliases and its flags, each flag with all its spellings and
//! whether it takes a value. `parse` reads arguments against one command's
//! entry and is the only way to a `Parsed`; a handler sees only the flags
//! it let through, as `Given`s naming their `Opt`. The unit tests in
//! `doc_tests` hold podscopectl(1), the usage and the completions to this
//! table.

use crate::fail::Fail;
use std::cell::Cell;

/// Every command and verb: `prepare` matches on it exhaustively, so a
/// command in the table without a handler does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// The root: the global flags, then a command.
    Podscopectl,
    List,
    Status,
    Create,
    Start,
    Stop,
    Rm,
    Wait,
    Update,
    Info,
    Pull,
    Images,
    Inspecti,
    Rmi,
    Imagefsinfo,
    /// A group: a verb follows.
    Container,
    ContainerCreate,
    ContainerStart,
    ContainerStop,
    ContainerRm,
    ContainerUpdate,
    ContainerCheckpoint,
    Ps,
    Inspect,
    Logs,
    Exec,
    Attach,
    Journal,
    Help,
}

/// A flag's canonical name, what handlers match on. One `Opt` may be
/// spelled differently by different commands (`--stdin` in container
/// create, `--interactive` in exec); the spellings are the `Flag`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    NoAskPassword,
    Version,
    Help,
    State,
    Label,
    Quiet,
    All,
    Pod,
    Namespace,
    Uid,
    Attempt,
    Hostname,
    HostNetwork,
    PidNamespace,
    Annotation,
    CgroupParent,
    LogDirectory,
    RuntimeHandler,
    Memory,
    CpuQuota,
    CpuPeriod,
    CpuShares,
    PidsLimit,
    CpusetCpus,
    Port,
    DnsServer,
    DnsSearch,
    DnsOption,
    Sysctl,
    Start,
    Creds,
    Auth,
    RegistryToken,
    Env,
    Workdir,
    User,
    Mount,
    Device,
    LogPath,
    Privileged,
    ReadOnly,
    CapAdd,
    CapDrop,
    Tty,
    Stdin,
    Timeout,
    Follow,
    StopAfterDump,
}

/// One flag: its spellings (the first is the one messages name) and, for a
/// flag that takes a value, the value's name as the usage writes it.
#[derive(Debug)]
pub struct Flag {
    pub opt: Opt,
    pub names: &'static [&'static str],
    pub value: Option<&'static str>,
}

/// What follows a command's flags and operands, kept verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Nothing: `--` only ends the flags; what follows it is operands.
    None,
    /// Once this many operands are read, the rest (a leading `--` dropped):
    /// exec's command, journal's journalctl options.
    AfterOperands(usize),
    /// Once the command (or a group's verb) is read, the rest as it is, a
    /// `--` included: that command's own arguments (`rm -- -x`).
    Subcommand,
    /// What follows `--`: container create's command.
    AfterDashDash,
}

/// One command or verb.
#[derive(Debug)]
pub struct Command {
    pub cmd: Cmd,
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub flags: &'static [Flag],
    /// What the command takes after its flags and operands.
    pub tail: Tail,
    /// A group's verbs (`container create`, ...).
    pub subcommands: &'static [Command],
}

const fn flag(opt: Opt, names: &'static [&'static str]) -> Flag {
    Flag {
        opt,
        names,
        value: None,
    }
}

const fn valued(opt: Opt, names: &'static [&'static str], value: &'static str) -> Flag {
    Flag {
        opt,
        names,
        value: Some(value),
    }
}

const fn command(cmd: Cmd, name: &'static str, flags: &'static [Flag]) -> Command {
    Command {
        cmd,
        name,
        aliases: &[],
        flags,
        tail: Tail::None,
        subcommands: &[],
    }
}

const QUIET: Flag = flag(Opt::Quiet, &["--quiet", "-q"]);
const LABEL: Flag = valued(Opt::Label, &["--label"], "K=V");
const STATE: Flag = valued(Opt::State, &["--state"], "STATE");
const START: Flag = flag(Opt::Start, &["--start"]);
const ATTEMPT: Flag = valued(Opt::Attempt, &["--attempt"], "N");
const MEMORY: Flag = valued(Opt::Memory, &["--memory"], "BYTES");
const CPU_QUOTA: Flag = valued(Opt::CpuQuota, &["--cpu-quota"], "USEC");
const CPU_PERIOD: Flag = valued(Opt::CpuPeriod, &["--cpu-period"], "USEC");
const CPU_SHARES: Flag = valued(Opt::CpuShares, &["--cpu-shares"], "N");
const PIDS_LIMIT: Flag = valued(Opt::PidsLimit, &["--pids-limit"], "N");
const CPUSET_CPUS: Flag = valued(Opt::CpusetCpus, &["--cpuset-cpus"], "LIST");
const INTERACTIVE: Flag = flag(Opt::Stdin, &["--interactive", "-i"]);
const TTY: Flag = flag(Opt::Tty, &["--tty", "-t"]);

/// The global flags, before the command.
const GLOBAL_FLAGS: &[Flag] = &[
    flag(Opt::NoAskPassword, &["--no-ask-password"]),
    flag(Opt::Version, &["--version", "-V"]),
    flag(Opt::Help, &["--help", "-h"]),
];

const CONTAINER_VERBS: &[Command] = &[
    command(
        Cmd::ContainerCreate,
        "create",
        &[
            valued(Opt::Env, &["--env", "-e"], "K=V"),
            valued(Opt::Workdir, &["--workdir", "-w"], "DIR"),
            valued(Opt::User, &["--user", "-u"], "UID|NAME"),
            valued(Opt::Mount, &["--mount"], "HOST:CONTAINER[:ro|:rro]"),
            valued(
                Opt::Device,
                &["--device"],
                "VENDOR/CLASS=NAME|HOST[:CONTAINER[:PERMS]]",
            ),
            LABEL,
            valued(Opt::LogPath, &["--log-path"], "PATH"),
            flag(Opt::Privileged, &["--privileged"]),
            flag(Opt::ReadOnly, &["--read-only"]),
            valued(Opt::CapAdd, &["--cap-add"], "CAP"),
            valued(Opt::CapDrop, &["--cap-drop"], "CAP"),
            TTY,
            flag(Opt::Stdin, &["--stdin", "-i"]),
            MEMORY,
            CPU_QUOTA,
            CPU_PERIOD,
            CPU_SHARES,
            CPUSET_CPUS,
            ATTEMPT,
            START,
        ],
    )
    .with_tail(Tail::AfterDashDash),
    command(Cmd::ContainerStart, "start", &[]),
    command(
        Cmd::ContainerStop,
        "stop",
        &[valued(Opt::Timeout, &["--timeout", "-t"], "SECONDS")],
    ),
    command(Cmd::ContainerRm, "rm", &[]).with_aliases(&["remove"]),
    command(
        Cmd::ContainerUpdate,
        "update",
        &[MEMORY, CPU_QUOTA, CPU_PERIOD, CPU_SHARES, CPUSET_CPUS],
    ),
    command(
        Cmd::ContainerCheckpoint,
        "checkpoint",
        &[
            valued(Opt::Timeout, &["--timeout", "-t"], "SECONDS"),
            flag(Opt::StopAfterDump, &["--stop"]),
        ],
    ),
];

const COMMANDS: &[Command] = &[
    command(Cmd::List, "list", &[STATE, LABEL, QUIET]),
    command(Cmd::Status, "status", &[]),
    command(
        Cmd::Create,
        "create",
        &[
            valued(Opt::Namespace, &["--namespace"], "NS"),
            valued(Opt::Uid, &["--uid"], "UID"),
            ATTEMPT,
            valued(Opt::Hostname, &["--hostname"], "NAME"),
            flag(Opt::HostNetwork, &["--host-network"]),
            valued(
                Opt::PidNamespace,
                &["--pid-namespace"],
                "pod|container|node",
            ),
            LABEL,
            valued(Opt::Annotation, &["--annotation"], "K=V"),
            valued(Opt::CgroupParent, &["--cgroup-parent"], "PARENT"),
            valued(Opt::LogDirectory, &["--log-directory"], "DIR"),
            valued(Opt::RuntimeHandler, &["--runtime-handler"], "NAME"),
            MEMORY,
            CPU_QUOTA,
            CPU_PERIOD,
            CPU_SHARES,
            PIDS_LIMIT,
            valued(Opt::Port, &["--port"], "HOST:CONTAINER[/PROTO]"),
            valued(Opt::DnsServer, &["--dns-server"], "IP"),
            valued(Opt::DnsSearch, &["--dns-search"], "DOMAIN"),
            valued(Opt::DnsOption, &["--dns-option"], "OPT"),
            valued(Opt::Sysctl, &["--sysctl"], "K=V"),
            START,
        ],
    ),
    command(Cmd::Start, "start", &[]),
    command(Cmd::Stop, "stop", &[]),
    command(Cmd::Rm, "rm", &[]).with_aliases(&["remove"]),
    command(Cmd::Wait, "wait", &[]),
    command(
        Cmd::Update,
        "update",
        &[MEMORY, CPU_QUOTA, CPU_PERIOD, CPU_SHARES, PIDS_LIMIT],
    ),
    command(Cmd::Info, "info", &[]),
    command(
        Cmd::Pull,
        "pull",
        &[
            valued(Opt::Creds, &["--creds"], "USER[:PASSWORD]"),
            valued(Opt::Auth, &["--auth"], "BASE64"),
            valued(Opt::RegistryToken, &["--registry-token"], "TOKEN"),
        ],
    ),
    command(Cmd::Images, "images", &[QUIET]),
    command(Cmd::Inspecti, "inspecti", &[]),
    command(Cmd::Rmi, "rmi", &[]),
    command(Cmd::Imagefsinfo, "imagefsinfo", &[]),
    Command {
        tail: Tail::Subcommand,
        subcommands: CONTAINER_VERBS,
        ..command(Cmd::Container, "container", &[])
    },
    command(
        Cmd::Ps,
        "ps",
        &[
            flag(Opt::All, &["--all", "-a"]),
            QUIET,
            valued(Opt::Pod, &["--pod", "-p"], "ID"),
            STATE,
            LABEL,
        ],
    ),
    command(Cmd::Inspect, "inspect", &[]),
    command(Cmd::Logs, "logs", &[flag(Opt::Follow, &["--follow", "-f"])]),
    command(
        Cmd::Exec,
        "exec",
        &[
            INTERACTIVE,
            TTY,
            valued(Opt::Timeout, &["--timeout"], "SECONDS"),
        ],
    )
    .with_tail(Tail::AfterOperands(1)),
    command(Cmd::Attach, "attach", &[INTERACTIVE, TTY]),
    command(Cmd::Journal, "journal", &[]).with_tail(Tail::AfterOperands(1)),
    command(Cmd::Help, "help", &[]),
];

/// The whole command line: global flags, then one of `COMMANDS`.
pub static ROOT: Command = Command {
    cmd: Cmd::Podscopectl,
    name: "podscopectl",
    aliases: &[],
    flags: GLOBAL_FLAGS,
    tail: Tail::Subcommand,
    subcommands: COMMANDS,
};

impl Command {
    const fn with_tail(self, tail: Tail) -> Self {
        Command { tail, ..self }
    }

    const fn with_aliases(self, aliases: &'static [&'static str]) -> Self {
        Command { aliases, ..self }
    }

    /// The verb or command named `name` (or one of its aliases).
    pub fn find(&'static self, name: &str) -> Option<&'static Command> {
        self.subcommands
            .iter()
            .find(|c| c.name == name || c.aliases.contains(&name))
    }

    /// Every command and verb under this one, with its path ("container
    /// create"), depth first.
    #[cfg(test)]
    pub fn walk(&'static self) -> Vec<(String, &'static Command)> {
        let mut out = Vec::new();
        for c in self.subcommands {
            out.push((c.name.to_owned(), c));
            for (path, sub) in c.walk() {
                out.push((format!("{} {path}", c.name), sub));
            }
        }
        out
    }
}

/// A flag the table let through, as it was given.
#[derive(Debug)]
pub struct Given {
    flag: &'static Flag,
    spelled: &'static str,
    value: String,
    /// Whether a handler asked what it is (`opt`).
    seen: Cell<bool>,
}

impl Given {
    fn new(flag: &'static Flag, spelled: &'static str, value: String) -> Self {
        Given {
            flag,
            spelled,
            value,
            seen: Cell::new(false),
        }
    }

    /// What the flag is; a handler that never asks has not taken it.
    pub fn opt(&self) -> Opt {
        self.seen.set(true);
        self.flag.opt
    }

    /// The spelling given, for messages.
    pub fn name(&self) -> &'static str {
        self.spelled
    }

    /// The value ("" for a flag that takes none).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The value as a number, or an error naming the flag and the value.
    pub fn number<T: std::str::FromStr>(&self) -> Result<T, Fail> {
        self.value.parse().map_err(|_| {
            Fail(format!(
                "{}: {:?} is not a number",
                self.spelled, self.value
            ))
        })
    }

    /// For a handler's catch-all: the table gives this command a flag the
    /// handler does not know (a bug the unit tests catch).
    pub fn unhandled(&self, p: &Parsed) -> Fail {
        Fail(format!(
            "{}: {} is in podscopectl's table but not handled (a bug)",
            p.path, self.spelled
        ))
    }
}

/// One command's arguments, parsed against its table entry.
#[derive(Debug)]
pub struct Parsed {
    path: String,
    flags: Vec<Given>,
    operands: Vec<String>,
    rest: Vec<String>,
}

impl Parsed {
    /// The command as messages name it ("container stop").
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn flags(&self) -> &[Given] {
        &self.flags
    }

    /// The arguments that are not flags, in order.
    pub fn operands(&self) -> &[String] {
        &self.operands
    }

    /// A flag no handler looked at: one the table has and the command's
    /// handler does not know (a bug, and an error, never ignored).
    pub fn unseen(&self) -> Option<&Given> {
        self.flags.iter().find(|g| !g.seen.get())
    }

    /// The command's `Tail`, verbatim (empty for a command without one).
    pub fn rest(&self) -> &[String] {
        &self.rest
    }

    fn err(&self, msg: String) -> Fail {
        if self.path.is_empty() {
            Fail(msg)
        } else {
            Fail(format!("{}: {msg}", self.path))
        }
    }
}

/// Parse `args` (what follows the command's name) against `cmd`'s entry;
/// `path` names the command in messages ("" for the root). A flag is
/// `--name`, `--name VALUE`, `--name=VALUE` or `-x [VALUE]`; short flags
/// that take no value may be joined (`-it`). Any flag not in the entry is
/// an error naming the command and the flag. After `--` every argument is
/// an operand, or the command's `Tail`.
pub fn parse(cmd: &'static Command, path: &str, args: &[String]) -> Result<Parsed, Fail> {
    let mut p = Parsed {
        path: path.to_owned(),
        flags: Vec::new(),
        operands: Vec::new(),
        rest: Vec::new(),
    };
    let lookup = |name: &str| {
        cmd.flags.iter().find_map(|f| {
            f.names
                .iter()
                .find(|n| **n == name)
                .map(|spelled| (f, *spelled))
        })
    };
    let mut dashdash = false;
    let mut i = 0;
    while i < args.len() {
        if cmd.tail == Tail::Subcommand && p.operands.len() == 1 {
            p.rest = args[i..].to_vec();
            return Ok(p);
        }
        if cmd.tail == Tail::AfterOperands(p.operands.len()) {
            let mut rest = &args[i..];
            if !dashdash && rest.first().is_some_and(|a| a == "--") {
                rest = &rest[1..];
            }
            p.rest = rest.to_vec();
            return Ok(p);
        }
        let a = &args[i];
        i += 1;
        if dashdash || a == "-" || !a.starts_with('-') {
            p.operands.push(a.clone());
            continue;
        }
        if a == "--" {
            if cmd.tail == Tail::AfterDashDash {
                p.rest = args[i..].to_vec();
                return Ok(p);
            }
            dashdash = true;
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v)),
            _ => (a.as_str(), None),
        };
        if let Some((f, spelled)) = lookup(name) {
            let value = match (f.value, inline) {
                (None, None) => String::new(),
                (None, Some(_)) => return Err(p.err(format!("{spelled} takes no value"))),
                (Some(_), Some(v)) => v.to_owned(),
                (Some(what), None) => {
                    let Some(v) = args.get(i) else {
                        return Err(p.err(format!("{spelled} needs a value ({what})")));
                    };
                    i += 1;
                    v.clone()
                }
            };
            p.flags.push(Given::new(f, spelled, value));
            continue;
        }
        // Short flags without values, joined: -it.
        let joined: Option<Vec<_>> = a
            .strip_prefix('-')
            .filter(|s| s.len() > 1 && !s.starts_with('-'))
            .map(|s| {
                s.chars()
                    .map(|c| lookup(&format!("-{c}")).filter(|(f, _)| f.value.is_none()))
                    .collect()
            })
            .and_then(|v: Vec<_>| v.into_iter().collect());
        match joined {
            Some(flags) => p.flags.extend(
                flags
                    .into_iter()
                    .map(|(f, spelled)| Given::new(f, spelled, String::new())),
            ),
            None => return Err(p.err(format!("unknown option {a:?}"))),
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn cmd(path: &str) -> &'static Command {
        ROOT.walk()
            .into_iter()
            .find(|(p, _)| p == path)
            .unwrap_or_else(|| panic!("no {path}"))
            .1
    }

    fn opts(p: &Parsed) -> Vec<(Opt, &str, &str)> {
        p.flags()
            .iter()
            .map(|g| (g.opt(), g.name(), g.value()))
            .collect()
    }

    #[test]
    fn flags_values_operands_and_rest() {
        let p = parse(
            cmd("container create"),
            "container create",
            &args("pod -e A=1 web --env=B=2 busybox -it --start -- sh -c -x"),
        )
        .unwrap();
        assert_eq!(p.operands(), ["pod", "web", "busybox"]);
        assert_eq!(
            opts(&p),
            [
                (Opt::Env, "-e", "A=1"),
                (Opt::Env, "--env", "B=2"),
                (Opt::Stdin, "-i", ""),
                (Opt::Tty, "-t", ""),
                (Opt::Start, "--start", ""),
            ]
        );
        assert_eq!(p.rest(), ["sh", "-c", "-x"]);
    }

    #[test]
    fn verbatim_after_the_operands() {
        let p = parse(cmd("exec"), "exec", &args("-it --timeout 3 abc sh -c -i")).unwrap();
        assert_eq!(p.operands(), ["abc"]);
        assert_eq!(p.rest(), ["sh", "-c", "-i"]);
        assert_eq!(opts(&p).len(), 3);
        for line in ["abc -- ls -l", "-- abc ls -l"] {
            let p = parse(cmd("exec"), "exec", &args(line)).unwrap();
            assert_eq!(
                (p.operands(), p.rest()),
                (&args("abc")[..], &args("ls -l")[..])
            );
        }
        // Without a tail, `--` only ends the flags.
        let p = parse(cmd("rm"), "rm", &args("-- -abc def")).unwrap();
        assert_eq!((p.operands(), p.rest()), (&args("-abc def")[..], &[][..]));
        let p = parse(cmd("journal"), "journal", &args("3fa1 -f -n 50 -o json")).unwrap();
        assert_eq!(p.rest(), ["-f", "-n", "50", "-o", "json"]);
        let p = parse(&ROOT, "", &args("--no-ask-password list -q")).unwrap();
        assert_eq!(p.operands(), ["list"]);
        assert_eq!(p.rest(), ["-q"]);
        // The root and a group hand their command its `--` as given.
        let p = parse(&ROOT, "", &args("rm -- -x")).unwrap();
        assert_eq!(
            (p.operands(), p.rest()),
            (&args("rm")[..], &args("-- -x")[..])
        );
        let p = parse(cmd("container"), "container", &args("rm -- -x")).unwrap();
        assert_eq!(p.rest(), ["--", "-x"]);
    }

    #[test]
    fn errors_name_the_command_and_the_flag() {
        let e = |path: &str, line: &str| parse(cmd(path), path, &args(line)).unwrap_err().0;
        assert_eq!(e("list", "--bogus"), "list: unknown option \"--bogus\"");
        assert_eq!(
            e("container stop", "-x abc"),
            "container stop: unknown option \"-x\""
        );
        // A flag another command has is still unknown here.
        assert_eq!(e("logs", "-i abc"), "logs: unknown option \"-i\"");
        assert_eq!(e("ps", "-aqz"), "ps: unknown option \"-aqz\"");
        // A short flag that takes a value cannot be joined.
        assert_eq!(e("ps", "-ap x"), "ps: unknown option \"-ap\"");
        assert_eq!(
            e("update", "abc --memory"),
            "update: --memory needs a value (BYTES)"
        );
        assert_eq!(
            e("create", "x --start=yes"),
            "create: --start takes no value"
        );
        assert_eq!(
            parse(&ROOT, "", &args("-x list")).unwrap_err().0,
            "unknown option \"-x\""
        );
    }

    #[test]
    fn names_and_spellings_are_unique() {
        for c in std::iter::once(&ROOT).chain(ROOT.walk().into_iter().map(|(_, c)| c)) {
            let mut names: Vec<&str> = c
                .subcommands
                .iter()
                .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
                .collect();
            let mut spellings: Vec<&str> = c
                .flags
                .iter()
                .flat_map(|f| f.names.iter().copied())
                .collect();
            for list in [&mut names, &mut spellings] {
                let n = list.len();
                list.sort();
                list.dedup();
                assert_eq!(list.len(), n, "{}: a name given twice: {list:?}", c.name);
            }
            for s in spellings {
                assert!(
                    (s.starts_with("--") && s.len() > 3) || (s.len() == 2 && s.starts_with('-')),
                    "{}: {s} is neither --long nor -x",
                    c.name
                );
            }
            let mut opts: Vec<String> = c.flags.iter().map(|f| format!("{:?}", f.opt)).collect();
            let n = opts.len();
            opts.sort();
            opts.dedup();
            assert_eq!(opts.len(), n, "{}: two flags with one Opt", c.name);
        }
    }
}
