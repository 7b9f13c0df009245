//! A podscope service's command line: `--config PATH` (which podscope.toml
//! it reads), `--version`, `--help`, and the service's own flags and
//! options, so that podscoped and podscope-cri answer the same words the
//! same way (a usage error exits 2 with the usage, as a missing value
//! does).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// The config file every podscope service reads unless told another.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/podscope/podscope.toml";

/// What a service is called and what it takes beyond the common words.
pub struct Spec<'a> {
    pub program: &'a str,
    pub version: &'a str,
    pub usage: &'a str,
    /// Words that stand alone (`--load-apparmor-profile`).
    pub flags: &'a [&'a str],
    /// Words that take the next argument as their value (`--listen PATH`).
    pub options: &'a [&'a str],
}

/// The command line read.
#[derive(Debug, Default)]
pub struct CommandLine {
    pub config: PathBuf,
    given: BTreeMap<String, Option<String>>,
}

impl CommandLine {
    /// Whether the flag was given.
    pub fn flag(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }

    /// The option's value, if it was given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.given.get(name).and_then(|v| v.as_deref())
    }
}

impl Spec<'_> {
    /// Read `args` (without the program's name). `Err` is the exit: 0
    /// after --version or --help, 2 after a usage error (said on stderr).
    pub fn parse(&self, args: impl IntoIterator<Item = String>) -> Result<CommandLine, ExitCode> {
        let mut cl = CommandLine {
            config: PathBuf::from(DEFAULT_CONFIG_PATH),
            given: BTreeMap::new(),
        };
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--version" => {
                    println!("{} {}", self.program, self.version);
                    return Err(ExitCode::SUCCESS);
                }
                "-h" | "--help" => {
                    println!("{}", self.usage);
                    return Err(ExitCode::SUCCESS);
                }
                "--config" => cl.config = self.value_of(&a, args.next())?.into(),
                f if self.flags.contains(&f) => {
                    cl.given.insert(a, None);
                }
                o if self.options.contains(&o) => {
                    let v = self.value_of(o, args.next())?;
                    cl.given.insert(a, Some(v));
                }
                other => return Err(self.usage_error(&format!("unknown argument {other:?}"))),
            }
        }
        Ok(cl)
    }

    fn value_of(&self, option: &str, v: Option<String>) -> Result<String, ExitCode> {
        v.ok_or_else(|| self.usage_error(&format!("{option} needs a value")))
    }

    /// Say `what` and the usage on stderr; the exit code of a usage error.
    pub fn usage_error(&self, what: &str) -> ExitCode {
        eprintln!("{}: {what}\n{}", self.program, self.usage);
        ExitCode::from(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        program: "p",
        version: "1",
        usage: "usage: p",
        flags: &["--once"],
        options: &["--listen"],
    };

    fn parse(words: &[&str]) -> Result<CommandLine, ExitCode> {
        SPEC.parse(words.iter().map(|w| w.to_string()))
    }

    #[test]
    fn the_common_words_and_the_services_own_are_read() {
        let cl = parse(&[]).unwrap();
        assert_eq!(cl.config, PathBuf::from(DEFAULT_CONFIG_PATH));
        assert!(!cl.flag("--once") && cl.value("--listen").is_none());
        let cl = parse(&["--config", "/x.toml", "--once", "--listen", "/s"]).unwrap();
        assert_eq!(cl.config, PathBuf::from("/x.toml"));
        assert!(cl.flag("--once"));
        assert_eq!(cl.value("--listen"), Some("/s"));
    }

    #[test]
    fn a_usage_error_exits_2_and_help_or_version_0() {
        for bad in [
            &["--config"][..],
            &["--listen"],
            &["--nope"],
            &["--once", "x"],
        ] {
            assert_eq!(parse(bad).unwrap_err(), ExitCode::from(2), "{bad:?}");
        }
        assert_eq!(parse(&["--version"]).unwrap_err(), ExitCode::SUCCESS);
        assert_eq!(parse(&["-h"]).unwrap_err(), ExitCode::SUCCESS);
    }
}
