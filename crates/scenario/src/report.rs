//! What `operon test` found: one report per test with the outcome of each step, and
//! the same as JUnit XML for CI systems.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The outcome of one test.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestReport {
    /// The test file.
    pub file: PathBuf,
    /// The test's name.
    pub name: String,
    /// Why the test could not run at all (its subject does not load, a fixture is
    /// wrong): then `steps` holds what ran before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Each step, in order.
    pub steps: Vec<StepReport>,
}

impl TestReport {
    /// Whether every step passed and the test ran.
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.steps.iter().all(StepReport::passed)
    }
}

/// The outcome of one step.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The step's title.
    pub name: String,
    /// How long its action and checks took.
    #[serde(serialize_with = "millis")]
    pub elapsed: Duration,
    /// What did not hold, each with where and why; empty when the step passed.
    pub failures: Vec<String>,
    /// What the step's runs did, in the form `expect.runs` is matched against.
    pub runs: Vec<serde_json::Value>,
    /// The answers, values, tasks or Diagnosis the step observed, in the forms
    /// `expect.admission`, `conversion`, `values`, `tasks` and `diagnosis` are matched
    /// against: where a test author copies from.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub observed: serde_json::Map<String, serde_json::Value>,
}

impl StepReport {
    /// Whether the step passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn millis<S: serde::Serializer>(elapsed: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((elapsed.as_secs_f64() * 1e6).round() / 1e3)
}

/// The reports as JUnit XML: a suite per test file, a case per step (a test that could
/// not run is one failing case).
pub fn junit(reports: &[TestReport]) -> String {
    let mut report = Report::new("operon test");
    let mut suites: Vec<TestSuite> = Vec::new();
    for test in reports {
        let suite_name = test.file.display().to_string();
        let index = match suites.iter().position(|s| s.name.as_str() == suite_name) {
            Some(index) => index,
            None => {
                suites.push(TestSuite::new(suite_name));
                suites.len() - 1
            }
        };
        let suite = &mut suites[index];
        for step in &test.steps {
            let status = if step.passed() {
                TestCaseStatus::success()
            } else {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(step.failures[0].clone());
                status.set_description(step.failures.join("\n"));
                status
            };
            let mut case = TestCase::new(step.name.clone(), status);
            case.set_classname(test.name.clone());
            case.set_time(step.elapsed);
            suite.add_test_case(case);
        }
        if let Some(error) = &test.error {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(error.clone());
            let mut case = TestCase::new("(the test could not run)", status);
            case.set_classname(test.name.clone());
            suite.add_test_case(case);
        }
    }
    report.add_test_suites(suites);
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot write JUnit XML: {e} -->"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, failures: &[&str]) -> StepReport {
        StepReport {
            name: name.to_owned(),
            elapsed: Duration::from_millis(3),
            failures: failures.iter().map(|f| (*f).to_owned()).collect(),
            runs: Vec::new(),
            observed: serde_json::Map::new(),
        }
    }

    #[test]
    fn junit_has_a_case_per_step_and_a_failure_with_its_differences() {
        let reports = vec![
            TestReport {
                file: "a.test.yaml".into(),
                name: "copies".to_owned(),
                error: None,
                steps: vec![
                    step("start", &[]),
                    step("Added event", &[".data.x: missing", ".data.y: missing"]),
                ],
            },
            TestReport {
                file: "a.test.yaml".into(),
                name: "broken".to_owned(),
                error: Some("hook h.sh does not load".to_owned()),
                steps: vec![],
            },
        ];
        assert!(reports[0].steps[0].passed() && !reports[0].passed() && !reports[1].passed());
        let xml = junit(&reports);
        assert!(xml.contains("<testsuite name=\"a.test.yaml\" tests=\"3\" skipped=\"0\" errors=\"1\" failures=\"1\""), "{xml}");
        assert!(
            xml.contains("<testcase name=\"Added event\" classname=\"copies\""),
            "{xml}"
        );
        assert!(xml.contains("message=\".data.x: missing\""), "{xml}");
        assert!(xml.contains("hook h.sh does not load"), "{xml}");
    }
}
