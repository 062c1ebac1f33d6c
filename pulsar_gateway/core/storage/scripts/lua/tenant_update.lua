--[[ tenant_update: replace a tenant's TenantInfo only if the tenant exists (Pulsar's
TenantsBase.updateTenant), so an update racing a delete on another gateway cannot bring
the deleted tenant back.

KEYS[1] tenants hash (tenant name -> TenantInfo JSON)
ARGV[1] tenant name
ARGV[2] the new TenantInfo JSON

Returns 1 when updated, 0 when the tenant does not exist.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
