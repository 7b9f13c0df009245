//! The operands every command reads alike: none, or KEY=VALUE.

use crate::fail::Fail;
use crate::spec::Parsed;

pub(crate) fn no_operands(p: &Parsed) -> Result<(), Fail> {
    match p.operands().first() {
        Some(a) => Err(Fail(format!("{}: unexpected argument {a:?}", p.path()))),
        None => Ok(()),
    }
}

pub(crate) fn kv(arg: &str, flag: &str) -> Result<(String, String), Fail> {
    arg.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| Fail(format!("{flag} takes KEY=VALUE, got {arg:?}")))
}
