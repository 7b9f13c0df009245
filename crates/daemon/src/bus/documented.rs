//! The documents' drift test for the D-Bus surface. The live daemon's
//! introspection must equal the shipped interface XML (integration test
//! `interface_xml_matches_live_introspection`); here every interface,
//! method, property and signal of that XML, and every error the code can
//! name, must be in podscoped(8), each member under its interface's
//! subsection, and every error in the XML's own list.

use super::interface_xml::{interfaces, XML};
use podscope_api::error::ErrorKind;
use podscope_api::errors::error_name;

const MAN: &str = include_str!("../../../../man/podscoped.8");

/// The man page's text under `.SS heading` (to the next .SS or .SH),
/// groff's `\-` read as `-`.
fn subsection(man: &str, heading: &str) -> Option<String> {
    let man = man.replace("\\-", "-");
    let marker = format!("\n.SS {heading}\n");
    let body = &man[man.find(&marker)? + marker.len()..];
    let end = body
        .find("\n.SS ")
        .into_iter()
        .chain(body.find("\n.SH "))
        .min()
        .unwrap_or(body.len());
    Some(body[..end].to_owned())
}

fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
        .any(|w| w.trim_end_matches('.') == word)
}

#[test]
fn every_member_and_error_is_in_the_man_page_and_the_xml() {
    let ifaces = interfaces(XML);
    let names: Vec<&str> = ifaces.iter().map(|(i, _)| i.as_str()).collect();
    for want in [
        podscope_api::MANAGER_INTERFACE,
        podscope_api::IMAGES_INTERFACE,
        podscope_api::SANDBOX_INTERFACE,
        podscope_api::CONTAINER_INTERFACE,
    ] {
        assert!(
            names.contains(&want),
            "{want} missing from the XML: {names:?}"
        );
    }
    let mut missing = Vec::new();
    for (iface, members) in &ifaces {
        let Some(section) = subsection(MAN, iface) else {
            missing.push(format!("a subsection .SS {iface}"));
            continue;
        };
        for (kind, member) in members {
            if !has_word(&section, member) {
                missing.push(format!("{iface} {kind} {member}"));
            }
        }
    }
    let errors = subsection(MAN, "Errors").expect("podscoped(8) has .SS Errors");
    for k in ErrorKind::ALL {
        let name = error_name(k);
        if !has_word(&errors, name) {
            missing.push(format!("error {name}"));
        }
        assert!(
            has_word(XML, name),
            "dbus/org.podscope.Sandbox1.xml does not list the error {name}"
        );
    }
    assert!(
        missing.is_empty(),
        "man/podscoped.8 lacks: {}",
        missing.join(", ")
    );
}

/// What `keys_of` gets from a type's Deserialize: the field list it hands
/// `deserialize_struct`, its dictionary's keys.
#[derive(Debug)]
struct Fields(&'static [&'static str]);

impl std::fmt::Display for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl serde::de::Error for Fields {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Fields(&[])
    }
}

/// A Deserializer that reads nothing: it answers every request with the
/// struct's field names (or none).
struct FieldNames;

impl<'de> serde::Deserializer<'de> for FieldNames {
    type Error = Fields;
    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(&[]))
    }
    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields))
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The keys of the dictionary (`a{sv}`) type `T`, from its Deserialize.
fn keys_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(FieldNames) {
        Err(Fields(keys)) => keys,
        Ok(_) => unreachable!("FieldNames yields no value"),
    }
}

/// Every key of every dictionary that crosses the bus (the `a{sv}` types
/// of `src/api`) is in the interface XML, where clients read what each
/// holds.
#[test]
fn every_dictionary_key_is_in_the_xml() {
    use podscope_api::{container, exec, image, sandbox};
    let types: [(&str, &[&str]); 24] = [
        ("Mount", keys_of::<container::Mount>()),
        ("Device", keys_of::<container::Device>()),
        ("HugepageLimit", keys_of::<container::HugepageLimit>()),
        ("container Resources", keys_of::<container::Resources>()),
        ("Security", keys_of::<container::Security>()),
        ("ContainerOptions", keys_of::<container::ContainerOptions>()),
        ("ContainerFilter", keys_of::<container::ContainerFilter>()),
        ("ContainerSummary", keys_of::<container::ContainerSummary>()),
        ("ContainerStatus", keys_of::<container::ContainerStatus>()),
        (
            "CheckpointOptions",
            keys_of::<container::CheckpointOptions>(),
        ),
        ("ExecOptions", keys_of::<exec::ExecOptions>()),
        ("PullOptions", keys_of::<image::PullOptions>()),
        ("ImageFilter", keys_of::<image::ImageFilter>()),
        ("ImageSummary", keys_of::<image::ImageSummary>()),
        ("ImageInfo", keys_of::<image::ImageInfo>()),
        ("ImageFsInfo", keys_of::<image::ImageFsInfo>()),
        ("sandbox Resources", keys_of::<sandbox::Resources>()),
        ("Dns", keys_of::<sandbox::Dns>()),
        ("PortMapping", keys_of::<sandbox::PortMapping>()),
        ("CreateOptions", keys_of::<sandbox::CreateOptions>()),
        ("ListFilter", keys_of::<sandbox::ListFilter>()),
        ("SandboxSummary", keys_of::<sandbox::SandboxSummary>()),
        ("SandboxStatus", keys_of::<sandbox::SandboxStatus>()),
        ("RuntimeInfo", keys_of::<sandbox::RuntimeInfo>()),
    ];
    // The list above is every dictionary type src/api declares.
    let declared: usize = [
        include_str!("../../../api/src/container.rs"),
        include_str!("../../../api/src/exec.rs"),
        include_str!("../../../api/src/image.rs"),
        include_str!("../../../api/src/sandbox.rs"),
    ]
    .iter()
    .map(|src| src.matches("#[zvariant(signature = \"a{sv}\")]").count())
    .sum();
    assert_eq!(declared, types.len(), "a dictionary type is missing here");
    let mut missing = Vec::new();
    for (ty, keys) in types {
        assert!(!keys.is_empty(), "{ty}: no keys read from its Deserialize");
        for key in keys {
            if !has_word(XML, key) {
                missing.push(format!("{ty}.{key}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "dbus/org.podscope.Sandbox1.xml does not name the keys {}",
        missing.join(", ")
    );
}
