//! What the benchmarks share to report their rounds.

/// The median of `values` (the upper one of an even count), sorting them in place.
pub fn median<T: PartialOrd + Copy>(values: &mut [T]) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("measurements are comparable"));
    values[values.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_median_is_the_middle_value_once_sorted() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4, 1, 3, 2]), 3);
        let ms = Duration::from_millis;
        assert_eq!(median(&mut [ms(9), ms(5), ms(7)]), ms(7));
    }
}
