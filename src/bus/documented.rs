//! The documents' drift test for the D-Bus surface. The live daemon's
//! introspection must equal the shipped interface XML (integration test
//! `interface_xml_matches_live_introspection`); here every interface,
//! method, property and signal of that XML, and every error the code can
//! name, must be in podscoped(8), each member under its interface's
//! subsection, and every error in the XML's own list.

use crate::api::errors::error_name;
use crate::error::ErrorKind;

const XML: &str = include_str!("../../dbus/org.podscope.Sandbox1.xml");
const MAN: &str = include_str!("../../man/podscoped.8");

/// (interface, [(kind, member)]) from the XML, comments left out.
fn interfaces(xml: &str) -> Vec<(String, Vec<(&'static str, String)>)> {
    let mut text = String::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<!--") {
        text.push_str(&rest[..i]);
        rest = rest[i..].split_once("-->").map_or("", |(_, r)| r);
    }
    text.push_str(rest);
    let mut out: Vec<(String, Vec<(&'static str, String)>)> = Vec::new();
    for tag in text.split('<').skip(1) {
        let kind = tag.split([' ', '>', '/']).next().unwrap_or("");
        let Some(name) = name_attr(tag) else { continue };
        match kind {
            "interface" => out.push((name.to_owned(), Vec::new())),
            "method" | "property" | "signal" => {
                let kind = match kind {
                    "method" => "method",
                    "property" => "property",
                    _ => "signal",
                };
                if let Some((_, members)) = out.last_mut() {
                    members.push((kind, name.to_owned()));
                }
            }
            _ => {}
        }
    }
    out
}

fn name_attr(tag: &str) -> Option<&str> {
    tag.split("name=\"").nth(1)?.split('"').next()
}

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
        crate::api::MANAGER_INTERFACE,
        crate::api::IMAGES_INTERFACE,
        crate::api::SANDBOX_INTERFACE,
        crate::api::CONTAINER_INTERFACE,
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

#[test]
fn the_parser_sees_what_the_xml_holds() {
    let ifaces = interfaces(
        r#"<node><!-- <interface name="x.Comment"> -->
        <interface name="a.B"><method name="M"><arg name="x"/></method>
        <property name="P" type="s" access="read"/><signal name="S"/></interface></node>"#,
    );
    assert_eq!(
        ifaces,
        vec![(
            "a.B".to_owned(),
            vec![
                ("method", "M".to_owned()),
                ("property", "P".to_owned()),
                ("signal", "S".to_owned())
            ]
        )]
    );
}
