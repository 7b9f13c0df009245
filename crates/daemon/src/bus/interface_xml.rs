//! The shipped interface XML (dbus/org.podscope.Sandbox1.xml), read: its
//! interfaces and their members. The metrics take the method names from
//! it (a caller's member name is kept as a label only if it is one), and
//! the documents' drift test holds the man page to it.

pub const XML: &str = include_str!("../../../../dbus/org.podscope.Sandbox1.xml");

/// (interface, [(kind, member)]) from the XML, comments left out.
pub fn interfaces(xml: &str) -> Vec<(String, Vec<(&'static str, String)>)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
