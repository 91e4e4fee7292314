// Package queue holds jobs until a worker takes them.
package queue

import "sync"

// Queue is a first-in, first-out list of jobs, safe for many goroutines.
type Queue struct {
	mu   sync.Mutex
	jobs []string
}

// Push adds a job at the back.
func (q *Queue) Push(job string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, job)
}

// Pop takes the job at the front; ok is false when the queue is empty.
func (q *Queue) Pop() (job string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return "", false
	}
	job, q.jobs = q.jobs[0], q.jobs[1:]
	return job, true
}
