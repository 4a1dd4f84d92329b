// The envelope of a resource as GET /{kind}/{id} answers it (tables, templates, ontologies).

import type { Placed, Principal } from './types'

export interface Owned extends Placed {
  owners: Principal[]
  created_at: number
  updated_at: number
}
