//! Output formats shared by the subcommands.

use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// JSON for programs.
    Json,
    /// YAML for people who like YAML.
    Yaml,
}

/// Prints `value` as JSON or YAML on stdout.
pub fn print_structured(format: Format, value: &impl Serialize) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml => print!("{}", yaml_serde::to_string(value)?),
        Format::Table => anyhow::bail!("table output is printed by each command"),
    }
    Ok(())
}

/// Renders rows as left-aligned columns under a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (cell, w) in cells.zip(&widths) {
            text.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}
