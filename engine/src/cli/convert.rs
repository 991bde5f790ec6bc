//! `operon convert`: rewrites other tools' objects into Operon's, reporting every change.

use anyhow::Context as _;
use clap::{Args, Subcommand};
use operon::kubediag::{self, Change};
use operon::manifest::{self, Manifests};
use serde::Deserialize as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ConvertCommand {
    /// Rewrite KubeDiag objects (diagnosis.kubediag.org/v1) into operon.dev/v1alpha1:
    /// the converted YAML on stdout, every field changed or dropped on stderr.
    Kubediag(KubediagArgs),
}

#[derive(Debug, Args)]
pub struct KubediagArgs {
    /// YAML files or directories (every *.yaml / *.yml under them).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Write each converted file into this directory (same file name) instead of stdout.
    #[arg(long)]
    output_dir: Option<PathBuf>,
}

pub fn run(command: ConvertCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConvertCommand::Kubediag(args) => convert_kubediag(&args),
    }
}

fn convert_kubediag(args: &KubediagArgs) -> anyhow::Result<ExitCode> {
    let (files, problems) = manifest::yaml_files(&args.paths);
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    let mut failed = !problems.is_empty();
    let mut converted_any = false;
    let mut output = String::new();
    let mut manifests = Manifests::default();
    let mut remaining = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let converted = match convert_text(file, &text) {
            Ok(converted) => converted,
            Err(message) => {
                eprintln!("error: {message}");
                failed = true;
                continue;
            }
        };
        converted_any |= converted.kubediag;
        for change in &converted.changes {
            eprintln!("{change}");
        }
        manifest::load_text(file, &converted.yaml, &mut manifests, &mut remaining);
        match &args.output_dir {
            Some(dir) => write_into(dir, file, &converted.yaml)?,
            None => {
                if !output.is_empty() {
                    output.push_str("---\n");
                }
                output.push_str(&converted.yaml);
            }
        }
    }
    print!("{output}");
    // What Operon still refuses in the result (e.g. an Operation whose only processor
    // was a KubeDiag function), checked across all files as `operon validate` would, so
    // that nothing surprises at apply time. Objects of other groups are not Operon's.
    remaining.extend(manifests.validate());
    for problem in remaining.iter().filter(|p| p.field != "apiVersion") {
        eprintln!("still to fix: {problem}");
    }
    if !converted_any && !failed {
        eprintln!(
            "warning: no {} object found",
            kubediag::KUBEDIAG_API_VERSION
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// One file converted.
struct ConvertedFile {
    /// Its documents as YAML, separated by `---`.
    yaml: String,
    /// Every change, prefixed with the file and document.
    changes: Vec<String>,
    /// Whether it held a KubeDiag object.
    kubediag: bool,
}

fn convert_text(file: &Path, text: &str) -> Result<ConvertedFile, String> {
    let mut out = ConvertedFile {
        yaml: String::new(),
        changes: Vec::new(),
        kubediag: false,
    };
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let source = format!("{}#{}", file.display(), index + 1);
        let value = match serde_json::Value::deserialize(document) {
            Ok(serde_json::Value::Null) => continue,
            Ok(value) => value,
            Err(e) => return Err(format!("{source}: not valid YAML: {e}")),
        };
        out.kubediag |= kubediag::is_kubediag(&value);
        let converted = kubediag::convert(value);
        out.changes
            .extend((converted.changes.iter()).map(|change: &Change| format!("{source} {change}")));
        for object in &converted.objects {
            if !out.yaml.is_empty() {
                out.yaml.push_str("---\n");
            }
            let yaml = yaml_serde::to_string(object)
                .map_err(|e| format!("{source}: cannot write YAML: {e}"))?;
            out.yaml.push_str(&yaml);
        }
    }
    Ok(out)
}

fn write_into(dir: &Path, file: &Path, yaml: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = file
        .file_name()
        .with_context(|| format!("{} has no file name", file.display()))?;
    let target = dir.join(name);
    if target.canonicalize().ok() == file.canonicalize().ok() {
        anyhow::bail!(
            "{} would overwrite its input: choose another --output-dir",
            target.display()
        );
    }
    std::fs::write(&target, yaml).with_context(|| format!("cannot write {}", target.display()))
}
