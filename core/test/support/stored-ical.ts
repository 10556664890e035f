// What a CalDAV server stored, as structure: an iCalendar file parsed with ical.js into its
// components and their properties. Tests compare it with what a plugin meant to write, so
// a control character that became a line of its own (a property, a whole component) shows.
import ICAL from 'ical.js';

export interface StoredComponent {
  name: string;
  /** [name, value] in file order; a value as text (times as ical.js prints them). */
  properties: [string, string][];
  components: StoredComponent[];
}

function walk(component: ICAL.Component): StoredComponent {
  return {
    name: component.name,
    properties: component.getAllProperties().map((p) => [p.name, String(p.getFirstValue())]),
    components: component.getAllSubcomponents().map(walk),
  };
}

/** The one root component of an iCalendar text; throws when there are several or none. */
export function storedShape(text: string): StoredComponent {
  const jcal = ICAL.parse(text) as unknown[];
  if (Array.isArray(jcal[0])) throw new Error(`${jcal.length} root components, not one`);
  return walk(new ICAL.Component(jcal as [string, unknown[], unknown[]]));
}

/** The property names of a component, sorted (each as often as it occurs). */
export function propertyNames(component: StoredComponent): string[] {
  return component.properties.map(([name]) => name).sort();
}

/** The values of one property of a component (every occurrence). */
export function propertyValues(component: StoredComponent, name: string): string[] {
  return component.properties.filter(([n]) => n === name).map(([, v]) => v);
}
