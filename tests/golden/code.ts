// A to-do list that keeps done items apart from open ones.

export interface Task {
  id: number;
  title: string;
  done: boolean;
}

export class TodoList {
  private tasks: Task[] = [];
  private next = 1;

  add(title: string): Task {
    const task = { id: this.next++, title, done: false };
    this.tasks.push(task);
    return task;
  }

  finish(id: number): boolean {
    const task = this.tasks.find((t) => t.id === id);
    if (!task || task.done) {
      return false;
    }
    task.done = true;
    return true;
  }

  open(): Task[] {
    return this.tasks.filter((t) => !t.done);
  }
}

export function summary(list: TodoList): string {
  const left = list.open().length;
  return left === 0 ? "nothing left to do" : `${left} task(s) open`;
}
