// Package tally counts words in lines of text.
package tally

import (
	"sort"
	"strings"
)

// Counts maps a word to how often it was seen.
type Counts map[string]int

// Add counts every word of a line, in lower case.
func (c Counts) Add(line string) {
	for _, word := range strings.Fields(line) {
		c[strings.ToLower(word)]++
	}
}

// Top returns the n most frequent words, ties in alphabetical order.
func (c Counts) Top(n int) []string {
	words := make([]string, 0, len(c))
	for w := range c {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if c[words[i]] != c[words[j]] {
			return c[words[i]] > c[words[j]]
		}
		return words[i] < words[j]
	})
	if len(words) > n {
		words = words[:n]
	}
	return words
}
