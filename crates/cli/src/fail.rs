//! What podscopectl says when a command fails: one message, the exit
//! status 1 (a usage error's, 2, is `spec`'s).

use podscope_api::errors::classify;

#[derive(Debug)]
pub(crate) struct Fail(pub(crate) String);

impl From<zbus::Error> for Fail {
    fn from(e: zbus::Error) -> Self {
        let (_, msg) = classify(&e);
        Fail(msg)
    }
}
