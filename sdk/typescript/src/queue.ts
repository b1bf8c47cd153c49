// An async queue: the request side of a client- or bidi-streaming call,
// fed by the caller (stdin writes, signals) while the responses are read.

export class Queue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private ended = false;

  push(v: T): void {
    if (this.ended) return;
    const w = this.waiting;
    if (w) {
      this.waiting = undefined;
      w({ value: v, done: false });
    } else {
      this.items.push(v);
    }
  }

  /** No more items: the iteration ends after those queued. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    const w = this.waiting;
    if (w && this.items.length === 0) {
      this.waiting = undefined;
      w({ value: undefined, done: true });
    }
  }

  get isEnded(): boolean {
    return this.ended;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const v = this.items.shift();
        if (v !== undefined) return Promise.resolve({ value: v, done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = resolve;
        });
      },
      return: () => {
        this.ended = true;
        this.items = [];
        return Promise.resolve({ value: undefined, done: true });
      },
      throw: (e?: unknown) => {
        this.ended = true;
        this.items = [];
        return Promise.reject(e);
      },
    };
  }
}
