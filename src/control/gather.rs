//! One answer per rank, collected with a running count of who is missing,
//! so that every arrival is O(1) and "all there?" never scans the ranks:
//! with thousands of ranks a scan per message is quadratic.

pub struct Gather<T> {
    answers: Vec<Option<T>>,
    missing: usize,
}

impl<T> Gather<T> {
    pub fn new(ranks: usize) -> Gather<T> {
        Gather { answers: std::iter::repeat_with(|| None).take(ranks).collect(), missing: ranks }
    }

    /// Records `rank`'s answer (a repeat replaces the first); true once
    /// every rank has answered.
    pub fn put(&mut self, rank: usize, answer: T) -> bool {
        if self.answers[rank].replace(answer).is_none() {
            self.missing -= 1;
        }
        self.missing == 0
    }

    pub fn has(&self, rank: usize) -> bool {
        self.answers[rank].is_some()
    }

    /// Every rank has answered.
    pub fn complete(&self) -> bool {
        self.missing == 0
    }

    pub fn any(&self) -> bool {
        self.missing < self.answers.len()
    }

    /// The ranks that have not answered, in rank order.
    pub fn missing(&self) -> Vec<usize> {
        (0..self.answers.len()).filter(|&r| self.answers[r].is_none()).collect()
    }

    /// The answers by rank.
    pub fn answers(&self) -> &[Option<T>] {
        &self.answers
    }

    pub fn into_answers(self) -> Vec<Option<T>> {
        self.answers
    }
}

#[cfg(test)]
mod tests {
    use super::Gather;

    #[test]
    fn counts_each_rank_once() {
        let mut g = Gather::new(3);
        assert!(!g.any());
        assert!(!g.put(2, 'a'));
        assert!(!g.put(2, 'b'), "a repeat does not count twice");
        assert_eq!(g.missing(), [0, 1]);
        assert!(!g.put(0, 'c'));
        assert!(g.put(1, 'd'));
        assert!(g.has(1) && g.any());
        assert_eq!(g.into_answers(), [Some('c'), Some('d'), Some('b')]);
    }
}
