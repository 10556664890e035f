// css-select (fb55's, on the domhandler tree htmlparser2 builds) under a deadline. A
// sender writes both the selectors and the tree, and one selector alone can cost a lot
// (`:has()` over a deep tree, long chains of descendant combinators, `:contains()`), so
// checking the clock between selectors is not enough: every step css-select takes through
// the tree goes through this adapter, which checks the clock and, once past the deadline,
// stops the match. The stop is an exception inside css-select only; what this module
// hands out is a value.
import { compile, selectAll, type Options } from 'css-select';
import type { AnyNode, Document, Element } from 'domhandler';
import * as DomUtils from 'domutils';

export type SelectOutcome =
  | { ok: true; elements: Element[] }
  /** `invalid`: css-select cannot read the selector (a browser drops such a rule too); `time`: past the deadline. */
  | { ok: false; reason: 'invalid' | 'time' };

/** Thrown by the adapter past the deadline, caught in this module only. */
class PastDeadline extends Error {}

/** Steps between two looks at the clock: the clock costs more than a step. */
const STEPS_PER_CHECK = 256;

export class BoundedSelector {
  private steps = 0;
  private past = false;
  private readonly options: Options<AnyNode, Element>;

  constructor(private readonly deadline: number) {
    const step = (): void => {
      if (++this.steps % STEPS_PER_CHECK === 0 && performance.now() > this.deadline) this.past = true;
      if (this.past) throw new PastDeadline();
    };
    const counted = <A extends unknown[], R>(f: (...args: A) => R) => (...args: A): R => {
      step();
      return f(...args);
    };
    this.options = {
      xmlMode: false,
      adapter: {
        isTag: DomUtils.isTag,
        getAttributeValue: counted(DomUtils.getAttributeValue),
        getChildren: counted(DomUtils.getChildren),
        getName: DomUtils.getName,
        getParent: counted(DomUtils.getParent),
        getSiblings: counted(DomUtils.getSiblings),
        prevElementSibling: counted(DomUtils.prevElementSibling),
        // A whole subtree's text in one call: worth a look at the clock each time.
        getText: (node) => {
          if (performance.now() > this.deadline) this.past = true;
          step();
          return DomUtils.getText(node);
        },
        hasAttrib: counted(DomUtils.hasAttrib),
        removeSubsets: DomUtils.removeSubsets,
        // A mail at rest: nothing is hovered, active or visited.
        isHovered: () => false,
        isActive: () => false,
        isVisited: () => false,
      },
    };
  }

  /** Has the deadline passed (seen by a match or by `check`)? */
  get expired(): boolean {
    return this.past;
  }

  /** Looks at the clock (for work between matches). */
  check(): boolean {
    if (performance.now() > this.deadline) this.past = true;
    return this.past;
  }

  /** Can css-select read `selector`? */
  valid(selector: string): boolean {
    try {
      compile(selector, this.options);
      return true;
    } catch (err) {
      if (err instanceof PastDeadline) return true; // compiling does not walk the tree; should it, the match says so
      return false;
    }
  }

  /** The elements of `dom` that `selector` matches, within the deadline. */
  select(selector: string, dom: Document): SelectOutcome {
    if (this.past) return { ok: false, reason: 'time' };
    try {
      return { ok: true, elements: selectAll(selector, dom, this.options) };
    } catch (err) {
      if (err instanceof PastDeadline) return { ok: false, reason: 'time' };
      return { ok: false, reason: 'invalid' };
    }
  }
}
