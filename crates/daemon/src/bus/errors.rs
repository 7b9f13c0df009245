//! The daemon's errors as D-Bus error replies: the public name of the
//! error's kind (`api::errors`), carrying its full context message.

use podscope_api::error::{Error, ErrorKind};
use podscope_api::errors::error_name;
use zbus::message::{Header, Message};
use zbus::names::ErrorName;
use zbus::DBusError;

#[derive(Debug)]
pub struct BusError {
    name: &'static str,
    message: String,
}

impl BusError {
    pub fn name_str(&self) -> &'static str {
        self.name
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<Error> for BusError {
    fn from(e: Error) -> Self {
        BusError {
            name: error_name(e.kind()),
            message: e.to_string(),
        }
    }
}

impl From<zbus::Error> for BusError {
    fn from(e: zbus::Error) -> Self {
        BusError {
            name: error_name(ErrorKind::Internal),
            message: format!("D-Bus: {e}"),
        }
    }
}

impl DBusError for BusError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        // Every method's error passes here on its way out: counted once.
        crate::metrics::bus_error(call.member().map_or("", |m| m.as_str()), self.name);
        Message::error(call, self.name)?.build(&(self.message.as_str(),))
    }
    fn name(&self) -> ErrorName<'_> {
        ErrorName::from_static_str_unchecked(self.name)
    }
    fn description(&self) -> Option<&str> {
        Some(&self.message)
    }
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for BusError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_the_kinds_name_and_the_message() {
        let e: BusError = Error::invalid("name", "must not be empty").into();
        assert_eq!(e.name_str(), "org.podscope.Sandbox1.Error.InvalidArgument");
        assert_eq!(e.message(), "name: must not be empty");
    }
}
